<?php
// The scheduler of Laravel 12 and later on the mysqllock store (SCHEDULE_CACHE_DRIVER=
// mysqllock, Schedule::useCache): `->onOneServer()->withoutOverlapping()` as an app's
// routes/console.php writes it. Its mutexes ask the store for lock() (the store is a
// LockProvider), not add/has/forget as Laravel 8's did. schedule:run's steps are
// Schedule::serverShouldRun() then Event::run(); "another server" is a child process with
// an app of its own. On Laravel 8 this file declares nothing, so PHPUnit collects nothing.
declare(strict_types=1);

namespace MySqlLockLaravelTest\Laravel13;

use Illuminate\Console\Scheduling\Event;
use Illuminate\Console\Scheduling\Schedule;
use MySqlLockLaravelTest\TestCase;

use function MySqlLockLaravelTest\laravelAtLeast;
use function MySqlLockLaravelTest\scheduledEvent;

use const MySqlLockLaravelTest\TABLE;

require_once dirname(__DIR__) . '/fixtures/base_path.php';

if (laravelAtLeast(12)) {
    final class SchedulerTest extends TestCase
    {
        /** A command unique to this test: `true` with a comment naming it, so mutex names differ per test. */
        private function command(): string
        {
            return 'true # ' . $this->lockName('event');
        }

        /**
         * This app's Schedule and its event for command(), its mutexes' rows cleaned up.
         *
         * @return array{Schedule, Event}
         */
        private function scheduled(): array
        {
            [$schedule, $event] = scheduledEvent($this->command());
            $this->resources[] = 'lvt_' . $event->mutexName();
            return [$schedule, $event];
        }

        /** The owner and seconds left of the lease on $resource, read on the tests' connection. */
        private function lease(string $resource): ?array
        {
            $st = self::db()->prepare('SELECT owner, TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(), expires_at) AS remaining FROM `' . TABLE . '` WHERE resource = ?');
            $st->execute([$resource]);
            $row = $st->fetch(\PDO::FETCH_ASSOC);
            return $row === false ? null : ['owner' => $row['owner'], 'remaining' => (int) $row['remaining']];
        }

        public function testOnOneServerLetsOneServerRunTheEventEachMinute(): void
        {
            [$schedule, $event] = $this->scheduled();
            $this->resources[] = 'lvt_' . $event->mutexName() . '1015';
            $this->resources[] = 'lvt_' . $event->mutexName() . '1016';
            $this->assertTrue($event->onOneServer);
            $this->assertTrue($schedule->serverShouldRun($event, new \DateTimeImmutable('2026-11-25 10:15')));
            $other = $this->child();
            $this->assertFalse($other->run(['schedule', 'serverShouldRun', $this->command(), '2026-11-25 10:15']));
            $this->assertTrue($other->run(['schedule', 'serverShouldRun', $this->command(), '2026-11-25 10:16']));
            [$again, $same] = scheduledEvent($this->command());
            $this->assertFalse($again->serverShouldRun($same, new \DateTimeImmutable('2026-11-25 10:16')), 'two servers ran the event in one minute');
        }

        public function testOnOneServerTakesALockOfAnHourThroughLock(): void
        {
            [$schedule, $event] = $this->scheduled();
            $resource = 'lvt_' . $event->mutexName() . '1015';
            $this->resources[] = $resource;
            $this->assertTrue($schedule->serverShouldRun($event, new \DateTimeImmutable('2026-11-25 10:15')));
            $lease = $this->lease($resource);
            $this->assertNotNull($lease, 'no lease for the minute\'s mutex');
            // Laravel 8's add() path names its owners "scheduler:..."; lock() gives Str::random(16).
            $this->assertMatchesRegularExpression('/^[A-Za-z0-9]{16}$/', $lease['owner']);
            $this->assertGreaterThan(3500, $lease['remaining']);
            $this->assertLessThanOrEqual(3601, $lease['remaining']);
        }

        public function testWithoutOverlappingHoldsTheMutexWhileTheEventRunsAndEndsItAfterwards(): void
        {
            [, $event] = $this->scheduled();
            $other = $this->child();
            $seen = [];
            $event->before(function () use ($other, $event, &$seen) {
                $seen['another server sees it running'] = $other->run(['schedule', 'overlaps', $this->command(), '']);
                $seen['its lease (minutes of withoutOverlapping)'] = $this->lease('lvt_' . $event->mutexName())['remaining'] > 1400 * 60;
            });
            $event->run($this->app);
            $this->assertSame(0, $event->exitCode);
            $this->assertSame(['another server sees it running' => true, 'its lease (minutes of withoutOverlapping)' => true], $seen);
            $this->assertFalse($other->run(['schedule', 'overlaps', $this->command(), '']));
            $this->assertNull($this->liveOwner($event->mutexName()));
        }

        public function testWithoutOverlappingSkipsTheEventWhileAnotherServerRunsIt(): void
        {
            [, $event] = $this->scheduled();
            // Another server's run in progress: its mutex, taken as Event::run() takes it.
            $theirs = $this->cache()->getStore()->lock($event->mutexName(), $event->expiresAt * 60);
            $this->assertTrue($theirs->acquire());
            $ran = false;
            $event->before(function () use (&$ran) {
                $ran = true;
            });
            $event->run($this->app);
            $this->assertFalse($ran);
            $this->assertNull($event->exitCode);
            $this->assertSame($theirs->owner(), $this->liveOwner($event->mutexName()), 'the skipped run touched the other server\'s mutex');
            $theirs->release();
            $event->run($this->app);
            $this->assertTrue($ran);
            $this->assertSame(0, $event->exitCode);
        }
    }
}
