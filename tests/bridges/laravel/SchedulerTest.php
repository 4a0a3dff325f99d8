<?php
// The scheduler on the mysqllock store (SCHEDULE_CACHE_DRIVER=mysqllock): Laravel 8.83's
// CacheEventMutex (withoutOverlapping) and CacheSchedulingMutex (onOneServer) send
// add/has/forget for their mutex names, which the store answers with leases; a real
// Event::run() takes and forgets its mutex; "another server" is a child process. Later
// Laravel versions ask the store for lock() on the same names instead (10.48's
// CacheEventMutex; its CacheSchedulingMutex still sends add/has): both paths meet.
declare(strict_types=1);

namespace MySqlLockLaravelTest;

use Illuminate\Console\Scheduling\CacheEventMutex;
use Illuminate\Console\Scheduling\CacheSchedulingMutex;
use Illuminate\Console\Scheduling\Event;

require_once __DIR__ . '/fixtures/base_path.php';

final class SchedulerTest extends TestCase
{
    /** A scheduled command (the shell's `true`), withoutOverlapping($minutes), its mutex on the mysqllock store. */
    private function event(string $command, int $minutes = 1440): Event
    {
        $mutex = (new CacheEventMutex($this->app->make('cache')))->useStore('mysqllock');
        $event = (new Event($mutex, $command))->withoutOverlapping($minutes);
        $this->resources[] = 'lvt_' . $event->mutexName();
        return $event;
    }

    /** A command unique to this test: `true` with a comment naming the test, so mutex names differ per test. */
    private function command(): string
    {
        return 'true # ' . $this->lockName('event');
    }

    public function testWithoutOverlappingTakesTheEventMutexOnce(): void
    {
        $event = $this->event($this->command());
        $this->assertTrue($event->mutex->create($event));
        $this->assertTrue($event->mutex->exists($event));
        $this->assertFalse($event->mutex->create($event));
    }

    public function testAnotherServerCannotTakeTheEventMutexWhileItIsHeld(): void
    {
        $event = $this->event($this->command());
        $this->assertTrue($event->mutex->create($event));
        $other = $this->child();
        $this->assertFalse($other->run(['eventMutex', 'create', $this->command(), 1440]));
        $this->assertTrue($other->run(['eventMutex', 'exists', $this->command(), 1440]));
    }

    public function testTheEventMutexIsForgottenFromAnotherProcess(): void
    {
        // schedule:finish, run after a background command, forgets the mutex in a process of its own.
        $event = $this->event($this->command());
        $this->assertTrue($event->mutex->create($event));
        $this->assertSame('done', $this->child()->run(['eventMutex', 'forget', $this->command(), 1440]));
        $this->assertFalse($event->mutex->exists($event));
        $this->assertTrue($event->mutex->create($event));
    }

    public function testTheEventMutexLivesForTheMinutesOfWithoutOverlapping(): void
    {
        $event = $this->event($this->command(), 2);
        $this->assertTrue($event->mutex->create($event));
        $st = self::db()->prepare('SELECT TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(), expires_at) FROM `' . TABLE . '` WHERE resource = ?');
        $st->execute(['lvt_' . $event->mutexName()]);
        $remaining = (int) $st->fetchColumn();
        $this->assertGreaterThan(100, $remaining);
        $this->assertLessThanOrEqual(121, $remaining);
    }

    public function testEventRunHoldsTheMutexWhileTheCommandRunsAndForgetsItAfterwards(): void
    {
        $event = $this->event($this->command());
        $other = $this->child();
        $seen = [];
        $event->before(function () use ($other, &$seen) {
            $seen['another server takes it'] = $other->run(['eventMutex', 'create', $this->command(), 1440]);
            $seen['another server sees it'] = $other->run(['eventMutex', 'exists', $this->command(), 1440]);
        });
        $this->assertTrue($event->filtersPass($this->app));
        $event->run($this->app);
        $this->assertSame(0, $event->exitCode);
        $this->assertSame(['another server takes it' => false, 'another server sees it' => true], $seen);
        $this->assertFalse($other->run(['eventMutex', 'exists', $this->command(), 1440]));
    }

    public function testEventRunIsSkippedWhileAnotherServerRunsTheEvent(): void
    {
        $other = $this->child();
        $this->assertTrue($other->run(['eventMutex', 'create', $this->command(), 1440]));
        $event = $this->event($this->command());
        $ran = false;
        $event->before(function () use (&$ran) {
            $ran = true;
        });
        $this->assertFalse($event->filtersPass($this->app));
        $event->run($this->app);
        $this->assertFalse($ran);
        $this->assertNull($event->exitCode);
        $this->assertSame('done', $other->run(['eventMutex', 'forget', $this->command(), 1440]));
        $this->assertTrue($event->filtersPass($this->app));
    }

    public function testOnOneServerLetsOneServerRunTheEventEachMinute(): void
    {
        $mutex = (new CacheSchedulingMutex($this->app->make('cache')))->useStore('mysqllock');
        $event = new Event(new CacheEventMutex($this->app->make('cache')), $this->command());
        $minute = '2026-11-25 10:15';
        array_push($this->resources, 'lvt_' . $event->mutexName() . '1015', 'lvt_' . $event->mutexName() . '1016');
        $this->assertTrue($mutex->create($event, new \DateTimeImmutable($minute)));
        $other = $this->child();
        $this->assertFalse($other->run(['schedulingMutex', 'create', $this->command(), $minute]));
        $this->assertTrue($other->run(['schedulingMutex', 'exists', $this->command(), $minute]));
        $this->assertTrue($other->run(['schedulingMutex', 'create', $this->command(), '2026-11-25 10:16']));
    }

    public function testTheLockPathOfLaterLaravelsMeetsTheSameMutex(): void
    {
        // Laravel 9.51 and later: create = lock(name, minutes * 60)->acquire(),
        // exists = !lock(name)->get(fn () => true), forget = lock(name)->forceRelease().
        $event = $this->event($this->command());
        $store = $this->cache()->getStore();
        $this->assertTrue($event->mutex->create($event));
        $this->assertFalse($store->lock($event->mutexName(), $event->expiresAt * 60)->get(fn () => true));
        $store->lock($event->mutexName(), $event->expiresAt * 60)->forceRelease();
        $this->assertFalse($event->mutex->exists($event));
        $this->assertTrue($store->lock($event->mutexName(), $event->expiresAt * 60)->acquire());
        $this->assertFalse($event->mutex->create($event));
    }
}
