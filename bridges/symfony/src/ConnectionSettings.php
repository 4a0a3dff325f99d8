<?php

declare(strict_types=1);

namespace MySqlLock\Symfony;

use MySqlLock\PdoFactory;
use Symfony\Component\Lock\Exception\InvalidArgumentException;

/**
 * Where a MySqlLockStore locks: a parsed `mysqllock://` / `mysql://` DSN, or the
 * extension's default connection (php.ini `mysqllock.dsn`). Opens PDOs on it for the
 * lease mode (through the extension, so they get its TLS settings as it gives them to
 * PDOs); the SharedLock mode hands the parts to SharedLock::configureConnection().
 *
 * @internal
 */
final class ConnectionSettings
{
    /** Options a DSN's query string may carry (the rest are refused, so typos are not silently ignored). */
    private const QUERY_KEYS = ['mode', 'table', 'initial_ttl', 'charset', 'socket'];

    /** The `mysql` client's TLS settings a DSN may carry (also spelled with `_`), for the extension. */
    private const TLS_KEYS = ['ssl-mode', 'ssl-ca', 'ssl-cert', 'ssl-key'];

    /**
     * @param array<string, string> $options the DSN's query options (mode, table, initial_ttl)
     * @param array<string, string> $tls the TLS settings, by their `-` names (ssl-mode, ssl-ca, ssl-cert, ssl-key)
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
        public readonly array $tls = [],
    ) {
    }

    /** Whether $dsn names the extension's default connection: `mysqllock:` or `mysqllock://`, with an optional query. */
    public static function isDefaultDsn(string $dsn): bool
    {
        return preg_match('#^mysqllock:(//)?(\?.*)?$#D', $dsn) === 1;
    }

    /**
     * `mysqllock://user:pass@host:port/db?mode=lease&table=...&initial_ttl=...&charset=...&socket=...`
     * (or `mysql://`), with the TLS settings of mysqllock.dsn if wanted (`&ssl-mode=VERIFY_IDENTITY&ssl-ca=...`,
     * `ssl-cert`, `ssl-key`); `mysqllock:` alone (with an optional query, not TLS: that is
     * mysqllock.dsn's) is the extension's default connection, whose server php.ini's
     * `mysqllock.dsn` names.
     *
     * @throws InvalidArgumentException for anything else
     */
    public static function fromDsn(string $dsn): self
    {
        if (self::isDefaultDsn($dsn)) {
            $query = (string) parse_url('x://h' . substr($dsn, strcspn($dsn, '?')), PHP_URL_QUERY);
            [$options, $tls] = self::query($query, $dsn);
            if ($tls !== []) {
                throw new InvalidArgumentException(sprintf('The mysqllock DSN "%s" names the default connection, whose TLS settings are those of php.ini\'s mysqllock.dsn: set %s there.', $dsn, implode(', ', array_keys($tls))));
            }
            return self::fromIni($options);
        }
        $parts = parse_url($dsn);
        $scheme = is_array($parts) ? strtolower($parts['scheme'] ?? '') : '';
        if (!in_array($scheme, ['mysqllock', 'mysql'], true) || !isset($parts['host'])) {
            throw new InvalidArgumentException(sprintf('Invalid mysqllock DSN "%s": expected mysqllock://user:password@host:port/database (or mysql://...), or mysqllock: for the extension\'s default connection.', self::mask($dsn)));
        }
        [$options, $tls] = self::query($parts['query'] ?? '', $dsn);
        return self::fromParts($parts, $options['charset'] ?? null, $options['socket'] ?? null, $options, $tls);
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
        $tls = [];
        foreach ($iniQuery as $key => $value) {
            if (is_string($value) && in_array(self::tlsKey((string) $key), self::TLS_KEYS, true)) {
                $tls[self::tlsKey((string) $key)] = $value;
            }
        }
        return self::fromParts($parts, $charset, isset($iniQuery['socket']) ? (string) $iniQuery['socket'] : null, $options, $tls);
    }

    /**
     * From parse_url()'s parts of a mysql:// URL (user, password and database
     * percent-decoded), the character set (utf8mb4 when null) and socket its query names.
     *
     * @param array<string, mixed> $parts
     * @param array<string, string> $options
     * @param array<string, string> $tls
     */
    private static function fromParts(array $parts, ?string $charset, ?string $socket, array $options, array $tls = []): self
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
            $tls,
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

    /**
     * A new PDO on this server: exceptions on, real prepared statements, the TLS settings
     * as the extension gives them to PDOs (MySqlLock\PdoFactory).
     *
     * @throws \InvalidArgumentException for a TLS setting a PDO cannot have
     * @throws \PDOException if connecting fails
     */
    public function openPdo(): \PDO
    {
        return PdoFactory::fromUrl($this->url());
    }

    /**
     * The `$additionalDsn` of SharedLock::configureConnection(): the socket and the TLS
     * settings, or null.
     */
    public function additionalDsn(): ?string
    {
        $pairs = $this->socket !== null ? ['unix_socket=' . $this->socket] : [];
        foreach ($this->tls as $key => $value) {
            $pairs[] = "$key=$value";
        }
        return $pairs === [] ? null : implode(';', $pairs);
    }

    /** What tells two settings apart (the password included, never shown). */
    public function identity(): string
    {
        return hash('sha256', serialize([$this->host, $this->port, $this->dbName, $this->user, $this->password, $this->charset, $this->socket, $this->tls]));
    }

    /** These settings as a `mysql://` URL in the syntax of php.ini's mysqllock.dsn. */
    private function url(): string
    {
        $host = (string) $this->host;
        if (str_contains($host, ':') && !str_starts_with($host, '[')) {
            $host = "[$host]";
        }
        $query = ['charset' => $this->charset] + ($this->socket !== null ? ['socket' => $this->socket] : []) + $this->tls;
        return 'mysql://' . rawurlencode($this->user) . ($this->password !== null ? ':' . rawurlencode($this->password) : '')
            . '@' . $host . ($this->port !== null ? ':' . $this->port : '') . '/' . rawurlencode($this->dbName ?? '')
            . '?' . http_build_query($query, '', '&', PHP_QUERY_RFC3986);
    }

    /** `ssl_mode` as `ssl-mode` (the extension takes both); other keys unchanged. */
    private static function tlsKey(string $key): string
    {
        return str_starts_with($key, 'ssl_') ? str_replace('_', '-', $key) : $key;
    }

    /**
     * The store's options and the TLS settings of a DSN's query.
     *
     * @return array{0: array<string, string>, 1: array<string, string>}
     */
    private static function query(string $query, string $dsn): array
    {
        parse_str($query, $pairs);
        $options = $tls = [];
        foreach ($pairs as $key => $value) {
            $key = (string) $key;
            if (is_string($value) && in_array(self::tlsKey($key), self::TLS_KEYS, true)) {
                $tls[self::tlsKey($key)] = $value;
            } elseif (is_string($value) && in_array($key, self::QUERY_KEYS, true)) {
                $options[$key] = $value;
            } else {
                throw new InvalidArgumentException(sprintf('Unknown option "%s" in the mysqllock DSN "%s" (known: %s).', $key, self::mask($dsn), implode(', ', [...self::QUERY_KEYS, ...self::TLS_KEYS])));
            }
        }
        return [$options, $tls];
    }

    /** The DSN with its password replaced, for messages. */
    private static function mask(string $dsn): string
    {
        return (string) preg_replace('#^([a-z]+://[^:/@]*:)[^@]*@#i', '$1***@', $dsn);
    }
}
