<?php
// Writes the C source of a PHP extension that registers what the loaded mysqllock.so
// registers (its classes with their parents, methods with their arguments, properties,
// constants and aliases; its functions; its php.ini settings), every method doing
// nothing: what PHP itself charges for that surface at startup, in the language of PHP's
// own extensions (bench/load.sh). With --empty, a module that registers nothing: what
// loading any shared extension costs.
//
//   php -d extension=.../libmysqllock_php.so bench/php/twin.php DIR [--empty]
//
// Writes DIR/config.m4 and DIR/twin.c (extension `twin`); build with phpize. Anything
// the generator cannot express in C ends it with a message: a twin that silently left
// something out would measure less than the extension registers.

declare(strict_types=1);

function fail(string $why): never
{
    fwrite(STDERR, "bench/php/twin.php: $why\n");
    exit(1);
}

/** A C string literal. */
function c_string(string $s): string
{
    return '"' . addcslashes($s, "\"\\\0..\37\177..\377") . '"';
}

/** The default of an internal function's parameter, as its arginfo holds it (text). */
function default_text(ReflectionParameter $p): ?string
{
    if (!$p->isOptional() || $p->isVariadic()) {
        return null;
    }
    return preg_match('/ = (.*) \]$/s', (string) $p, $m) ? $m[1] : null;
}

const CODES = [
    'mixed' => 'IS_MIXED', 'callable' => 'IS_CALLABLE', 'int' => 'IS_LONG', 'string' => 'IS_STRING',
    'bool' => '_IS_BOOL', 'float' => 'IS_DOUBLE', 'array' => 'IS_ARRAY', 'void' => 'IS_VOID',
    'static' => 'IS_STATIC', 'object' => 'IS_OBJECT', 'iterable' => 'IS_ITERABLE', 'never' => 'IS_NEVER',
];

/** `ZEND_TYPE_INIT_*` for a parameter or return type; $flags the arginfo flags. */
function type_init(?ReflectionType $type, string $flags, string $where): string
{
    if ($type === null) {
        return "ZEND_TYPE_INIT_NONE($flags)";
    }
    if (!$type instanceof ReflectionNamedType) {
        fail("$where: union and intersection types are not written");
    }
    $nullable = $type->allowsNull() && $type->getName() !== 'mixed' ? 'true' : 'false';
    if ($type->isBuiltin()) {
        $code = CODES[$type->getName()] ?? fail("$where: type {$type->getName()} is not written");
        return "ZEND_TYPE_INIT_CODE($code, $nullable, $flags)";
    }
    return 'ZEND_TYPE_INIT_CLASS_CONST(' . c_string($type->getName()) . ", $nullable, $flags)";
}

/** The arginfo table of $f, named $name. */
function arginfo(ReflectionFunctionAbstract $f, string $name, string $where): string
{
    if ($f->isDeprecated() || $f->hasTentativeReturnType()) {
        fail("$where: deprecated functions and tentative return types are not written");
    }
    $required = $f->getNumberOfRequiredParameters();
    $ref = $f->returnsReference() ? 1 : 0;
    $lines = ["static const zend_internal_arg_info {$name}[] = {"];
    $lines[] = "    { (const char *)(uintptr_t)$required, "
        . type_init($f->getReturnType(), "_ZEND_ARG_INFO_FLAGS($ref, 0, 0)", "$where return") . ', NULL },';
    foreach ($f->getParameters() as $p) {
        if ($p->isPassedByReference() && $p->canBePassedByValue()) {
            fail("$where \${$p->getName()}: prefer-by-reference parameters are not written");
        }
        $flags = sprintf('_ZEND_ARG_INFO_FLAGS(%d, %d, 0)', $p->isPassedByReference() ? 1 : 0, $p->isVariadic() ? 1 : 0);
        $default = default_text($p);
        $lines[] = '    { ' . c_string($p->getName()) . ', ' . type_init($p->getType(), $flags, "$where \${$p->getName()}")
            . ', ' . ($default === null ? 'NULL' : c_string($default)) . ' },';
    }
    $lines[] = '};';
    return implode("\n", $lines);
}

/** `ZEND_ACC_PUBLIC`, `_PROTECTED` or `_PRIVATE`: the visibility of a method, constant or property. */
function visibility(ReflectionMethod|ReflectionClassConstant|ReflectionProperty $r): string
{
    return $r->isPublic() ? 'ZEND_ACC_PUBLIC' : ($r->isProtected() ? 'ZEND_ACC_PROTECTED' : 'ZEND_ACC_PRIVATE');
}

/** One statement declaring a constant or property of class $c through `$declare` (the Zend
 * function: name, value, flags, no doc comment). */
function declaration(string $declare, int $c, string $name, mixed $value, string $access, string $where): string
{
    return '        { zval v; ' . zval_of($value, 'v', $where) . " $declare(twin_ce[$c], zend_string_init_interned("
        . c_string($name) . ', ' . strlen($name) . ", 1), &v, $access, NULL); }";
}

/** A `zend_function_entry` for $f with $arginfo; a method's flags from reflection. */
function entry(ReflectionFunctionAbstract $f, string $name, string $arginfo): string
{
    $flags = [];
    if ($f instanceof ReflectionMethod) {
        $flags[] = visibility($f);
        foreach (['isStatic' => 'ZEND_ACC_STATIC', 'isFinal' => 'ZEND_ACC_FINAL', 'isAbstract' => 'ZEND_ACC_ABSTRACT'] as $is => $acc) {
            if ($f->$is()) {
                $flags[] = $acc;
            }
        }
    }
    $count = count($f->getParameters());
    return '    { ' . c_string($name) . ", twin_nothing, $arginfo, $count, " . ($flags ? implode(' | ', $flags) : '0') . ' },';
}

/** A zval initialiser for a constant or property default ($tmp the variable). */
function zval_of(mixed $value, string $tmp, string $where): string
{
    return match (true) {
        $value === null => "ZVAL_NULL(&$tmp);",
        is_bool($value) => "ZVAL_BOOL(&$tmp, " . ($value ? 1 : 0) . ');',
        is_int($value) => "ZVAL_LONG(&$tmp, {$value});",
        is_float($value) => "ZVAL_DOUBLE(&$tmp, " . var_export($value, true) . ');',
        is_string($value) => "ZVAL_INTERNED_STR(&$tmp, zend_string_init_interned(" . c_string($value) . ', ' . strlen($value) . ', 1));',
        $value === [] => "ZVAL_EMPTY_ARRAY(&$tmp);",
        default => fail("$where: a default of type " . get_debug_type($value) . ' is not written'),
    };
}

$usage = 'usage: twin.php DIR [--empty]';
$dir = $argv[1] ?? fail($usage);
$mode = $argv[2] ?? '';
if ($argc > 3 || !in_array($mode, ['', '--empty'], true)) {
    fail($usage);
}
$empty = $mode === '--empty';
if (!$empty && !extension_loaded('mysqllock')) {
    fail('mysqllock.so is not loaded: nothing to copy');
}

$decls = [];
$functions = [];
$registers = [];
$counts = ['classes' => 0, 'methods' => 0, 'functions' => 0, 'ini' => 0];
$names = [];
$ini_entries = [];
if (!$empty) {
    $extension = new ReflectionExtension('mysqllock');
    if ($extension->getConstants() !== []) {
        fail('global constants are not written');
    }
    foreach (array_values($extension->getFunctions()) as $i => $f) {
        $decls[] = arginfo($f, "arginfo_f$i", $f->getName());
        $functions[] = entry($f, $f->getName(), "arginfo_f$i");
        $counts['functions']++;
    }
    // The extension's classes and aliases (an alias under its lower-case key), in the
    // order they were registered: parents before their children.
    foreach ($extension->getClassNames() as $key) {
        $class = new ReflectionClass($key);
        $c = $counts['classes'];
        if ($class->getName() !== $key) {
            $of = $names[$class->getName()] ?? fail("alias $key of a class not written before it");
            $registers[] = '    zend_register_class_alias_ex(' . c_string($key) . ', ' . strlen($key) . ", twin_ce[$of], 1);";
            continue;
        }
        $own_interfaces = array_diff($class->getInterfaceNames(), $class->getParentClass() ? $class->getParentClass()->getInterfaceNames() : []);
        if ($class->isInterface() || $class->isTrait() || $class->isEnum() || $own_interfaces !== []
            || $class->isAbstract() || $class->isReadOnly()) {
            fail("{$class->getName()}: interfaces, traits, enums, own interface lists, abstract and readonly classes are not written");
        }
        $methods = [];
        foreach ($class->getMethods() as $m) {
            if ($m->getDeclaringClass()->getName() !== $class->getName()) {
                continue;
            }
            $decls[] = arginfo($m, "arginfo_c{$c}_{$m->getName()}", "{$class->getName()}::{$m->getName()}");
            $methods[] = entry($m, $m->getName(), "arginfo_c{$c}_{$m->getName()}");
            $counts['methods']++;
        }
        $decls[] = "static const zend_function_entry twin_methods_{$c}[] = {\n" . implode("\n", $methods) . "\n    ZEND_FE_END\n};";
        $parent = $class->getParentClass();
        $parent_ce = match (true) {
            $parent === false => 'NULL',
            $parent->getName() === 'Exception' => 'zend_ce_exception',
            $parent->getName() === 'RuntimeException' => 'spl_ce_RuntimeException',
            isset($names[$parent->getName()]) => "twin_ce[{$names[$parent->getName()]}]",
            default => fail("{$class->getName()}: parent {$parent->getName()} is not written"),
        };
        $body = ["    {", "        zend_class_entry ce;", "        INIT_CLASS_ENTRY(ce, " . c_string($class->getName()) . ", twin_methods_{$c});",
            "        twin_ce[$c] = zend_register_internal_class_ex(&ce, $parent_ce);"];
        if ($class->isFinal()) {
            $body[] = "        twin_ce[$c]->ce_flags |= ZEND_ACC_FINAL;";
        }
        foreach ($class->getReflectionConstants() as $k) {
            if ($k->getDeclaringClass()->getName() !== $class->getName()) {
                continue;
            }
            if ((method_exists($k, 'hasType') && $k->hasType()) || (method_exists($k, 'isDeprecated') && $k->isDeprecated())) {
                fail("{$class->getName()}::{$k->getName()}: typed and deprecated constants are not written");
            }
            $access = visibility($k) . ($k->isFinal() ? ' | ZEND_ACC_FINAL' : '');
            $body[] = declaration('zend_declare_class_constant_ex', $c, $k->getName(), $k->getValue(), $access,
                "{$class->getName()}::{$k->getName()}");
        }
        foreach ($class->getProperties() as $p) {
            if ($p->getDeclaringClass()->getName() !== $class->getName()) {
                continue;
            }
            $hooked = method_exists($p, 'hasHooks') && $p->hasHooks();
            $asymmetric = method_exists($p, 'isPrivateSet') && ($p->isPrivateSet() || $p->isProtectedSet());
            if ($p->hasType() || $p->isReadOnly() || $hooked || $asymmetric) {
                fail("{$class->getName()}::\${$p->getName()}: typed, readonly, hooked and asymmetric properties are not written");
            }
            $access = visibility($p) . ($p->isStatic() ? ' | ZEND_ACC_STATIC' : '');
            $body[] = declaration('zend_declare_property_ex', $c, $p->getName(), $p->getDefaultValue(), $access,
                "{$class->getName()}::\${$p->getName()}");
        }
        $body[] = '    }';
        $registers[] = implode("\n", $body);
        $names[$class->getName()] = $c;
        $counts['classes']++;
    }
    // In registration order, each with its access level (read after: ini_get_all sorts
    // the engine's table of settings in place).
    $settings = $extension->getINIEntries();
    $access = ini_get_all('mysqllock') ?: [];
    foreach ($settings as $name => $value) {
        $ini_entries[] = '    PHP_INI_ENTRY(' . c_string($name) . ', ' . c_string((string) $value) . ", {$access[$name]['access']}, NULL)";
        $counts['ini']++;
    }
}

// What the entries share (only when there are any: unused, they would not compile).
if ($counts['methods'] + $counts['functions'] > 0) {
    array_unshift($decls, 'static void twin_nothing(INTERNAL_FUNCTION_PARAMETERS) { (void)execute_data; RETURN_NULL(); }');
}
if ($counts['classes'] > 0) {
    array_unshift($decls, "static zend_class_entry *twin_ce[{$counts['classes']}];");
}
$ini_table = $ini_entries !== [] ? "PHP_INI_BEGIN()\n" . implode("\n", $ini_entries) . "\nPHP_INI_END()\n" : '';
$c_source = <<<C
// Generated by bench/php/twin.php: what mysqllock.so registers, every method doing nothing.
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#include "php.h"
#include "php_ini.h"
#include "zend_exceptions.h"
#include "ext/spl/spl_exceptions.h"

C
    . implode("\n", $decls) . "\n\nstatic const zend_function_entry twin_functions[] = {\n" . implode("\n", $functions) . "\n    ZEND_FE_END\n};\n\n"
    . $ini_table . "\nstatic PHP_MINIT_FUNCTION(twin)\n{\n    (void)type; (void)module_number;\n"
    . ($ini_table ? "    REGISTER_INI_ENTRIES();\n" : '') . implode("\n", $registers) . "\n    return SUCCESS;\n}\n\n"
    . "static PHP_MSHUTDOWN_FUNCTION(twin)\n{\n    (void)type; (void)module_number;\n" . ($ini_table ? "    UNREGISTER_INI_ENTRIES();\n" : '')
    . "    return SUCCESS;\n}\n\n" . <<<C
zend_module_entry twin_module_entry = {
    STANDARD_MODULE_HEADER, "twin", twin_functions, PHP_MINIT(twin), PHP_MSHUTDOWN(twin), NULL, NULL, NULL, "0", STANDARD_MODULE_PROPERTIES
};
ZEND_GET_MODULE(twin)

C;

$m4 = <<<'M4'
PHP_ARG_ENABLE([twin], [whether to build the twin], [--enable-twin])
if test "$PHP_TWIN" != "no"; then
  PHP_NEW_EXTENSION(twin, twin.c, $ext_shared)
fi

M4;
(is_dir($dir) || mkdir($dir, 0777, true)) || fail("cannot create $dir");
file_put_contents("$dir/twin.c", $c_source) !== false || fail("cannot write $dir/twin.c");
file_put_contents("$dir/config.m4", $m4) !== false || fail("cannot write $dir/config.m4");
printf("%s: %d classes, %d methods, %d functions, %d php.ini settings\n", $empty ? 'empty' : 'twin', ...array_values($counts));
