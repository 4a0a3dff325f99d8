<?php

declare(strict_types=1);

namespace MySqlLock\Symfony;

use Symfony\Component\Lock\Exception\InvalidArgumentException;

/**
 * Where a MySqlLockStore locks: a parsed `mysqllock://` / `mysql://` DSN, or the
 * extension's default connection (php.ini `mysqllock.dsn`). Opens PDOs on it for the
 * lease mode; the SharedLock mode hands the parts to SharedLock::configureConnection().
 *
 * @internal
 */
final class ConnectionSettings
{
    /** Options a DSN's query string may carry (the rest are refused, so typos are not silently ignored). */
    private const QUERY_KEYS = ['mode', 'table', 'initial_ttl', 'charset', 'socket'];

    /**
     * @param array<string, string> $options the DSN's query options (mode, table, initial_ttl)
     */
    private function __construct(
        public readonly ?string $host,
        public readonly ?int $port,
        public readonly ?string $dbName,
        public readonly string $user,
        public readonly ?string $password,
        public readonly string $charset,
        public readonly ?string $socket,
        public readonly array $options,
    ) {
    }

    /** Whether $dsn names the extension's default connection: `mysqllock:` or `mysqllock://`, with an optional query. */
    public static function isDefaultDsn(string $dsn): bool
    {
        return preg_match('#^mysqllock:(//)?(\?.*)?$#D', $dsn) === 1;
    }

    /**
     * `mysqllock://user:pass@host:port/db?mode=lease&table=...&initial_ttl=...&charset=...&socket=...`
     * (or `mysql://`); `mysqllock:` alone (with an optional query) is the extension's
     * default connection, whose server php.ini's `mysqllock.dsn` names.
     *
     * @throws InvalidArgumentException for anything else
     */
    public static function fromDsn(string $dsn): self
    {
        if (self::isDefaultDsn($dsn)) {
            $query = (string) parse_url('x://h' . substr($dsn, strcspn($dsn, '?')), PHP_URL_QUERY);
            return self::fromIni(self::query($query, $dsn));
        }
        $parts = parse_url($dsn);
        $scheme = is_array($parts) ? strtolower($parts['scheme'] ?? '') : '';
        if (!in_array($scheme, ['mysqllock', 'mysql'], true) || !isset($parts['host'])) {
            throw new InvalidArgumentException(sprintf('Invalid mysqllock DSN "%s": expected mysqllock://user:password@host:port/database (or mysql://...), or mysqllock: for the extension\'s default connection.', self::mask($dsn)));
        }
        $options = self::query($parts['query'] ?? '', $dsn);
        return self::fromParts($parts, $options['charset'] ?? null, $options['socket'] ?? null, $options);
    }

    /**
     * The server of the extension's default connection (php.ini `mysqllock.dsn`), with
     * $options from the store's own DSN.
     *
     * @param array<string, string> $options
     * @throws InvalidArgumentException when mysqllock.dsn is not set
     */
    public static function fromIni(array $options = []): self
    {
        $ini = (string) ini_get('mysqllock.dsn');
        if ($ini === '') {
            throw new InvalidArgumentException('The extension\'s default connection is not configured: set mysqllock.dsn in php.ini, or give MySqlLockStore a DSN or a PDO.');
        }
        $parts = parse_url($ini);
        if (!is_array($parts) || !isset($parts['host'])) {
            throw new InvalidArgumentException('php.ini\'s mysqllock.dsn is not a mysql://user:password@host:port/database URL.');
        }
        parse_str($parts['query'] ?? '', $iniQuery);
        $charset = isset($iniQuery['charset']) ? (string) $iniQuery['charset'] : null;
        return self::fromParts($parts, $charset, isset($iniQuery['socket']) ? (string) $iniQuery['socket'] : null, $options);
    }

    /**
     * From parse_url()'s parts of a mysql:// URL (user, password and database
     * percent-decoded), the character set (utf8mb4 when null) and socket its query names.
     *
     * @param array<string, mixed> $parts
     * @param array<string, string> $options
     */
    private static function fromParts(array $parts, ?string $charset, ?string $socket, array $options): self
    {
        $path = trim($parts['path'] ?? '', '/');
        return new self(
            rawurldecode($parts['host']),
            isset($parts['port']) ? (int) $parts['port'] : null,
            $path === '' ? null : rawurldecode($path),
            rawurldecode($parts['user'] ?? ''),
            isset($parts['pass']) ? rawurldecode($parts['pass']) : null,
            $charset ?? 'utf8mb4',
            $socket,
            $options,
        );
    }

    /**
     * The table php.ini's mysqllock.dsn names for $mode (`?table=` for SharedLock,
     * `?lease_table=` for the lease mode), or null for the default.
     */
    public static function iniTable(string $mode): ?string
    {
        parse_str((string) parse_url((string) ini_get('mysqllock.dsn'), PHP_URL_QUERY), $query);
        $table = $query[$mode === 'lease' ? 'lease_table' : 'table'] ?? null;
        return is_string($table) && $table !== '' ? $table : null;
    }

    /** A new PDO on this server: exceptions on, real prepared statements. */
    public function openPdo(): \PDO
    {
        $dsn = 'mysql:' . ($this->socket !== null ? 'unix_socket=' . $this->socket : 'host=' . $this->host . ($this->port !== null ? ';port=' . $this->port : ''));
        $dsn .= ($this->dbName !== null ? ';dbname=' . $this->dbName : '') . ';charset=' . $this->charset;
        return new \PDO($dsn, $this->user, $this->password, [
            \PDO::ATTR_ERRMODE => \PDO::ERRMODE_EXCEPTION,
            \PDO::ATTR_EMULATE_PREPARES => false,
        ]);
    }

    /** What tells two settings apart (the password included, never shown). */
    public function identity(): string
    {
        return hash('sha256', serialize([$this->host, $this->port, $this->dbName, $this->user, $this->password, $this->charset, $this->socket]));
    }

    /** @return array<string, string> */
    private static function query(string $query, string $dsn): array
    {
        parse_str($query, $options);
        foreach ($options as $key => $value) {
            if (!in_array($key, self::QUERY_KEYS, true) || !is_string($value)) {
                throw new InvalidArgumentException(sprintf('Unknown option "%s" in the mysqllock DSN "%s" (known: %s).', $key, self::mask($dsn), implode(', ', self::QUERY_KEYS)));
            }
        }
        return $options;
    }

    /** The DSN with its password replaced, for messages. */
    private static function mask(string $dsn): string
    {
        return (string) preg_replace('#^([a-z]+://[^:/@]*:)[^@]*@#i', '$1***@', $dsn);
    }
}
