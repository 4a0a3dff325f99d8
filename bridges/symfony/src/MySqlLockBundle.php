<?php

declare(strict_types=1);

namespace MySqlLock\Symfony;

use MySqlLock\Symfony\DependencyInjection\MySqlLockStoreFactoryPass;
use Symfony\Component\DependencyInjection\ContainerBuilder;
use Symfony\Component\HttpKernel\Bundle\Bundle;

/**
 * Lets `framework.lock` take a `mysqllock://` DSN (also through `%env()%`):
 *
 * ```yaml
 * framework:
 *     lock: '%env(LOCK_DSN)%'   # LOCK_DSN=mysqllock://app:secret@db:3306/app
 * ```
 */
final class MySqlLockBundle extends Bundle
{
    public function build(ContainerBuilder $container): void
    {
        $container->addCompilerPass(new MySqlLockStoreFactoryPass());
    }
}
