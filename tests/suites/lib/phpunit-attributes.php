<?php
// Every PHPUnit annotation of a test file has its attribute, and every attribute its
// annotation: PHPUnit 9.6 reads only the annotations, PHPUnit 10 and later only the
// attributes, so a test with one and not the other runs under one PHPUnit and is silently
// missing (or loses its data or group) under the other.
//
//   php tests/suites/lib/phpunit-attributes.php FILE|DIR...   # exit 1 and a list when they differ
//   php tests/suites/lib/phpunit-attributes.php --self-test   # proves it flags what it must
declare(strict_types=1);

/**
 * The annotations with an attribute of the same name and argument (`@dataProvider x` and
 * `#[DataProvider('x')]`). Any other PHPUnit annotation is refused: it needs a rule here.
 */
const SAME_NAME = ['test', 'dataProvider', 'group', 'depends', 'before', 'after', 'beforeClass',
    'afterClass', 'doesNotPerformAssertions', 'runInSeparateProcess', 'small', 'medium', 'large', 'ticket'];
const OTHER_PHPUNIT = ['backupGlobals', 'backupStaticAttributes', 'covers', 'coversDefaultClass',
    'coversNothing', 'preserveGlobalState', 'requires', 'runTestsInSeparateProcesses', 'testdox',
    'testWith', 'uses', 'expectedException', 'expectedExceptionMessage', 'expectedExceptionCode'];

/** One line per disagreement in $source (named $file in the messages). */
function disagreements(string $file, string $source): array
{
    // A declaration with the docblock and the attributes right above it.
    $declaration = '~(?:(/\*\*(?:(?!\*/).)*\*/)\s*)?((?:#\[[^\]]*\]\s*)*)'
        . '(?<!\w)(?:(?:final|abstract|public|protected|private|static|readonly)\s+)*(function|class)\s+(\w+)~s';
    preg_match_all($declaration, $source, $matches, PREG_SET_ORDER | PREG_OFFSET_CAPTURE);
    $problems = [];
    foreach ($matches as $m) {
        $line = substr_count($source, "\n", 0, $m[0][1]) + 1;
        $where = "$file:$line {$m[3][0]} {$m[4][0]}";
        $fromDoc = [];
        preg_match_all('~(?<=\s|\*)@(\w+)(?:[ \t]+([^\s*@][^\s*]*))?~', $m[1][0] ?? '', $tags, PREG_SET_ORDER);
        foreach ($tags as $t) {
            if (in_array($t[1], OTHER_PHPUNIT, true)) {
                $problems[] = "$where: @{$t[1]} has no rule in " . basename(__FILE__) . ' (add its attribute and a rule)';
            } elseif (in_array($t[1], SAME_NAME, true)) {
                $fromDoc[] = ucfirst($t[1]) . (isset($t[2]) && $t[1] !== 'test' ? "({$t[2]})" : '');
            }
        }
        $fromAttributes = [];
        preg_match_all('~#\[\s*\\\\?(?:PHPUnit\\\\Framework\\\\Attributes\\\\)?(\w+)\s*(?:\(\s*[\'"]([^\'"]*)[\'"]\s*\))?\s*\]~',
            $m[2][0] ?? '', $attrs, PREG_SET_ORDER);
        foreach ($attrs as $a) {
            if (in_array(lcfirst($a[1]), SAME_NAME, true)) {
                $fromAttributes[] = $a[1] . (isset($a[2]) ? "($a[2])" : '');
            }
        }
        sort($fromDoc);
        sort($fromAttributes);
        if ($fromDoc !== $fromAttributes) {
            $problems[] = "$where: annotations [" . implode(', ', $fromDoc) . '] but attributes ['
                . implode(', ', $fromAttributes) . ']';
        }
    }
    return $problems;
}

/** The *.php files of the arguments (directories recursively). */
function files(array $paths): array
{
    $files = [];
    foreach ($paths as $path) {
        if (is_dir($path)) {
            $it = new RecursiveIteratorIterator(new RecursiveDirectoryIterator($path, FilesystemIterator::SKIP_DOTS));
            foreach ($it as $f) {
                if (str_ends_with($f->getFilename(), 'Test.php')) {
                    $files[] = $f->getPathname();
                }
            }
        } elseif (is_file($path)) {
            $files[] = $path;
        } else {
            fwrite(STDERR, "phpunit-attributes: $path does not exist\n");
            exit(2);
        }
    }
    sort($files);
    return $files;
}

/** Each kind of mismatch is flagged, and the agreeing forms are not. */
function selfTest(): int
{
    $agree = <<<'PHP'
        /** @group tls */
        #[Group('tls')]
        final class A {
            /** @test @dataProvider cases */
            #[Test]
            #[DataProvider('cases')]
            public function a(): void {}
            /**
             * Prose with a mail@example.org address.
             *
             * @test
             */
            #[\PHPUnit\Framework\Attributes\Test]
            public function b(): void {}
            public function testC(): void {}
        }
        PHP;
    $cases = [
        'annotation without attribute' => "/** @test */\npublic function a(): void {}",
        'attribute without annotation' => "#[Test]\npublic function a(): void {}",
        'other provider' => "/** @dataProvider x */\n#[DataProvider('y')]\npublic function testA(): void {}",
        'class group missing' => "/** @group tls */\nfinal class A {}",
        'unmapped annotation' => "/** @test @requires PHP 8.4 */\n#[Test]\npublic function a(): void {}",
    ];
    $failed = 0;
    if (($p = disagreements('agree', $agree)) !== []) {
        fwrite(STDERR, "phpunit-attributes self-test: agreeing forms were flagged:\n" . implode("\n", $p) . "\n");
        $failed++;
    }
    foreach ($cases as $label => $source) {
        if (disagreements($label, $source) === []) {
            fwrite(STDERR, "phpunit-attributes self-test: \"$label\" was not flagged\n");
            $failed++;
        }
    }
    return $failed === 0 ? 0 : 1;
}

$args = array_slice($argv, 1);
if ($args === ['--self-test']) {
    exit(selfTest());
}
if ($args === []) {
    fwrite(STDERR, "usage: php phpunit-attributes.php FILE|DIR... | --self-test\n");
    exit(2);
}
$problems = [];
$files = files($args);
foreach ($files as $file) {
    $problems = array_merge($problems, disagreements($file, (string) file_get_contents($file)));
}
if ($problems !== []) {
    fwrite(STDERR, "PHPUnit 9.6 reads annotations, 10 and later attributes: they disagree here\n  "
        . implode("\n  ", $problems) . "\n");
    exit(1);
}
exit(0);
