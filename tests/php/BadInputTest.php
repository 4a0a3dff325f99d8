<?php
// SPEC §7: bad input gets a clear, typed error and changes nothing.
declare(strict_types=1);

namespace MySqlLockTest;

use ItsMieger\MySqlSharedLocks\Exception\SharedLockAcquireException;
use ItsMieger\MySqlSharedLocks\SharedLock;
use ItsMieger\MySqlSharedLocks\SharedLockHandle;
use PHPUnit\Framework\Attributes\DataProvider;
use PHPUnit\Framework\Attributes\Test;

final class BadInputTest extends TestCase
{
    /**
     * [name kind, timeout, ttl, what getPrevious()'s message must mention]
     * Name kinds: 'ok' (a valid unique name), 'empty', 'long' (65 characters),
     * 'cjk' (characters the latin1 column cannot store).
     */
    public static function badLockArguments(): array
    {
        return [
            'empty name' => ['empty', 0, 10, '/empty/i'],
            'name of 65 characters' => ['long', 0, 10, '/64|65|long/i'],
            'name the latin1 column cannot store' => ['cjk', 0, 10, '/latin1|character|stor/i'],
            'negative timeout' => ['ok', -1, 10, '/timeout/i'],
            'NAN timeout' => ['ok', NAN, 10, '/timeout/i'],
            'INF timeout' => ['ok', INF, 10, '/timeout/i'],
            'negative ttl' => ['ok', 0, -1, '/ttl/i'],
            'zero ttl' => ['ok', 0, 0, '/ttl/i'],
            'NAN ttl' => ['ok', 0, NAN, '/ttl/i'],
            'INF ttl' => ['ok', 0, INF, '/ttl/i'],
        ];
    }

    /** A lock name of $kind (badLockArguments). Not name(): PHPUnit 10+ has a final TestCase::name(). */
    private function badLockName(string $kind): string
    {
        switch ($kind) {
            case 'empty':
                return '';
            case 'long':
                return str_pad($this->prefix(), 65, 'x');
            case 'cjk':
                return $this->lockName('日本語');
            default:
                return $this->lockName();
        }
    }

    /**
     * @test
     * @dataProvider badLockArguments
     */
    #[Test]
    #[DataProvider('badLockArguments')]
    public function badLockArgumentsThrowAcquireException(string $kind, $timeout, $ttl, string $cause): void
    {
        $name = $this->badLockName($kind);
        $e = $this->catchThrown(fn () => SharedLock::lock($name, $timeout, $ttl));
        $this->assertSame(SharedLockAcquireException::class, get_class($e), (string) $e);
        $this->assertSame($name, $e->getLockName());
        $this->assertStringStartsWith("Acquiring lock \"$name\" failed", $e->getMessage());
    }

    /**
     * @test
     * @dataProvider badLockArguments
     */
    #[Test]
    #[DataProvider('badLockArguments')]
    public function badLockArgumentsAreExplainedByGetPrevious(string $kind, $timeout, $ttl, string $cause): void
    {
        $name = $this->badLockName($kind);
        $e = $this->catchThrown(fn () => SharedLock::lock($name, $timeout, $ttl));
        $this->assertNotNull($e->getPrevious(), 'getPrevious() does not explain: ' . $e->getMessage());
        $this->assertMatchesRegularExpression($cause, $e->getPrevious()->getMessage());
    }

    /**
     * @test
     * @dataProvider badLockArguments
     */
    #[Test]
    #[DataProvider('badLockArguments')]
    public function badLockArgumentsLeaveTheTableUnchanged(string $kind, $timeout, $ttl, string $cause): void
    {
        $name = $this->badLockName($kind);
        SharedLock::lock($this->lockName('witness'), 0, 10);
        $before = $this->ownRows();
        $this->catchThrown(fn () => SharedLock::lock($name, $timeout, $ttl));
        $this->assertSame($before, $this->ownRows());
    }

    /** @test */
    #[Test]
    public function nameOf64CharactersCanBeLocked(): void
    {
        $name = str_pad($this->prefix(), 64, 'x');
        SharedLock::lock($name, 0, 10);
        $this->assertCount(1, self::rows($name));
    }

    /** @test */
    #[Test]
    public function nameWithLatin1LettersIsStoredExactly(): void
    {
        $name = $this->lockName('Müller-Größe');
        SharedLock::lock($name, 0, 10);
        $this->assertSame($name, self::rows($name)[0]['name'] ?? null);
    }

    /** @test */
    #[Test]
    public function fractionalTtlIsAccepted(): void
    {
        $this->assertInstanceOf(SharedLockHandle::class, SharedLock::lock($this->lockName(), 0, 0.5));
    }

    /** @test */
    #[Test]
    public function setQuoteStyleRejectsStyleFive(): void
    {
        $this->expectException(\InvalidArgumentException::class);
        SharedLock::setQuoteStyle(5);
    }

    /** @test */
    #[Test]
    public function rejectedQuoteStyleKeepsTheCurrentOne(): void
    {
        $name = $this->lockName();
        $this->catchThrown(fn () => SharedLock::setQuoteStyle(5));
        SharedLock::lock($name, 0, 10);
        $this->assertCount(1, self::rows($name));
    }

    public static function badTableNames(): array
    {
        return [
            'backtick' => ['a`b'],
            'double quote' => ['a"b'],
            'space' => ['a b'],
            'semicolon' => ['shared_locks; DROP TABLE x'],
            'empty' => [''],
            '65 characters' => [str_repeat('t', 65)],
        ];
    }

    /**
     * @test
     * @dataProvider badTableNames
     */
    #[Test]
    #[DataProvider('badTableNames')]
    public function setTableRejectsAnInvalidName(string $table): void
    {
        $this->assertTrue(method_exists(SharedLock::class, 'setTable'), 'SharedLock::setTable() does not exist');
        $this->expectException(\InvalidArgumentException::class);
        SharedLock::setTable($table);
    }

    /**
     * @test
     * @dataProvider badTableNames
     */
    #[Test]
    #[DataProvider('badTableNames')]
    public function rejectedTableNameKeepsTheCurrentTable(string $table): void
    {
        $this->assertTrue(method_exists(SharedLock::class, 'setTable'), 'SharedLock::setTable() does not exist');
        $this->catchThrown(fn () => SharedLock::setTable($table));
        $this->assertSame('shared_locks', SharedLock::getTable());
    }

    /** @test */
    #[Test]
    public function wrongPasswordNeverAppearsInTheExceptionChain(): void
    {
        $s = server();
        SharedLock::configureConnection($s['host'], $s['db'], $s['user'], 'wrong-pw-123', 'utf8mb4', $s['port']);
        $e = $this->catchThrown(fn () => SharedLock::lock($this->lockName(), 0, 10));
        $this->assertInstanceOf(SharedLockAcquireException::class, $e);
        $this->assertStringNotContainsString('wrong-pw-123', implode("\n", array_merge([$e->getMessage()], self::previousMessages($e))));
    }

    /** @test */
    #[Test]
    public function wrongPasswordIsReportedAsAccessDenied(): void
    {
        $s = server();
        SharedLock::configureConnection($s['host'], $s['db'], $s['user'], 'wrong-pw-123', 'utf8mb4', $s['port']);
        $e = $this->catchThrown(fn () => SharedLock::lock($this->lockName(), 0, 10));
        $this->assertMatchesRegularExpression('/access denied/i', implode("\n", self::previousMessages($e)));
    }
}
