<?php

declare(strict_types=1);

namespace MySqlLock\Symfony\DependencyInjection;

use MySqlLock\Symfony\MySqlLockStoreFactory;
use Symfony\Component\DependencyInjection\Compiler\CompilerPassInterface;
use Symfony\Component\DependencyInjection\ContainerBuilder;
use Symfony\Component\Lock\Store\StoreFactory;

/**
 * FrameworkBundle builds each framework.lock store with StoreFactory::createStore(DSN);
 * this pass points those definitions at MySqlLockStoreFactory, which handles `mysqllock:`
 * and hands every other DSN back to StoreFactory. The DSN is read when the store is
 * created, so `%env(...)%` works.
 */
final class MySqlLockStoreFactoryPass implements CompilerPassInterface
{
    public function process(ContainerBuilder $container): void
    {
        foreach ($container->getDefinitions() as $definition) {
            $factory = $definition->getFactory();
            if (is_array($factory) && $factory[0] === StoreFactory::class && $factory[1] === 'createStore') {
                $definition->setFactory([MySqlLockStoreFactory::class, 'createStore']);
            }
        }
    }
}
