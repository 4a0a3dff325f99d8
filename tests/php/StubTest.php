<?php
// php-ext/mysqllock.stub.php (for IDEs and static analysers) must be valid PHP and
// declare exactly what the extension registers, as Reflection sees both.
declare(strict_types=1);

namespace MySqlLockTest;

use PHPUnit\Framework\Attributes\Test;
use PHPUnit\Framework\TestCase as PHPUnitTestCase;

final class StubTest extends PHPUnitTestCase
{
    private const STUB = __DIR__ . '/../../php-ext/mysqllock.stub.php';

    /** @var array<string, array> reflection JSON per side, computed once */
    private static array $reflected = [];

    /** Runs fixtures/reflect.php in a separate process and decodes its JSON. */
    private function reflect(string $side): array
    {
        if (!isset(self::$reflected[$side])) {
            $this->assertFileExists(self::STUB, 'the stub file does not exist');
            $cmd = $side === 'ext'
                ? [PHP_BINARY, '-d', 'extension=' . extensionPath(), __DIR__ . '/fixtures/reflect.php', 'ext']
                : [PHP_BINARY, __DIR__ . '/fixtures/reflect.php', 'stub', self::STUB];
            $proc = proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
            $stdout = stream_get_contents($pipes[1]);
            $stderr = stream_get_contents($pipes[2]);
            $status = proc_close($proc);
            $this->assertSame(0, $status, "reflecting the $side failed: $stderr $stdout");
            self::$reflected[$side] = json_decode($stdout, true, 512, JSON_THROW_ON_ERROR);
        }
        return self::$reflected[$side];
    }

    /** $f applied to every class of both sides: [stub, extension]. */
    private function bothSides(callable $f): array
    {
        return [
            array_map($f, $this->reflect('stub')['classes']),
            array_map($f, $this->reflect('ext')['classes']),
        ];
    }

    /** @test */
    #[Test]
    public function stubPassesPhpLint(): void
    {
        $this->assertFileExists(self::STUB, 'the stub file does not exist');
        exec(escapeshellarg(PHP_BINARY) . ' -l ' . escapeshellarg(self::STUB) . ' 2>&1', $output, $status);
        $this->assertStringContainsString('No syntax errors', implode("\n", $output));
    }

    /** @test */
    #[Test]
    public function extensionRegistersItsClasses(): void
    {
        $classes = array_keys($this->reflect('ext')['classes']);
        foreach (['ItsMieger\\MySqlSharedLocks\\SharedLock', 'Nene\\Kit\\DistributedLock', 'MySqlLock\\SessionLock', 'MySqlLock\\LockException'] as $class) {
            $this->assertContains($class, $classes);
        }
    }

    /** @test */
    #[Test]
    public function stubDeclaresExactlyTheExtensionsClasses(): void
    {
        $this->assertSame(array_keys($this->reflect('ext')['classes']), array_keys($this->reflect('stub')['classes']));
    }

    /** @test */
    #[Test]
    public function stubDeclaresExactlyTheExtensionsFunctions(): void
    {
        $this->assertSame($this->reflect('ext')['functions'], $this->reflect('stub')['functions']);
    }

    /** @test */
    #[Test]
    public function stubClassesHaveTheExtensionsParents(): void
    {
        [$stub, $ext] = $this->bothSides(fn (array $c) => $c['parent']);
        $this->assertSame($ext, $stub);
    }

    /** @test */
    #[Test]
    public function stubClassesHaveTheExtensionsPublicMethods(): void
    {
        [$stub, $ext] = $this->bothSides(fn (array $c) => array_map(
            fn (array $m) => ($m['static'] ? 'static ' : '') . $m['name'],
            array_values($c['methods'])
        ));
        $this->assertSame($ext, $stub);
    }

    /** @test */
    #[Test]
    public function stubMethodsHaveTheExtensionsParameterNamesAndOptionality(): void
    {
        $signature = fn (array $c) => array_map(
            fn (array $m) => array_map(
                fn (array $p) => ($p['optional'] ? '?' : '') . ($p['variadic'] ? '...' : '') . ($p['byRef'] ? '&' : '') . '$' . $p['name'],
                $m['parameters']
            ),
            $c['methods']
        );
        [$stub, $ext] = $this->bothSides($signature);
        $this->assertSame($ext, $stub);
    }

    /** @test */
    #[Test]
    public function stubDefaultsMatchTheExtensionsWhereBothAreReflectable(): void
    {
        $stubDefaults = [];
        $extDefaults = [];
        $ext = $this->reflect('ext')['classes'];
        foreach ($this->reflect('stub')['classes'] as $class => $c) {
            foreach ($c['methods'] as $key => $m) {
                foreach ($m['parameters'] as $i => $p) {
                    $e = $ext[$class]['methods'][$key]['parameters'][$i] ?? null;
                    if (isset($p['default'], $e['default'])) {
                        $where = "$class::{$m['name']}(\${$p['name']})";
                        $stubDefaults[$where] = $p['default'];
                        $extDefaults[$where] = $e['default'];
                    }
                }
            }
        }
        $this->assertSame($extDefaults, $stubDefaults);
    }

    /** @test */
    #[Test]
    public function stubClassesHaveTheExtensionsConstants(): void
    {
        [$stub, $ext] = $this->bothSides(fn (array $c) => $c['constants']);
        $this->assertSame($ext, $stub);
    }
}
