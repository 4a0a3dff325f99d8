<?php

declare(strict_types=1);

namespace MySqlLockExample\SymfonyCron;

use Symfony\Component\Console\Command\Command;
use Symfony\Component\Console\Input\InputInterface;
use Symfony\Component\Console\Input\InputOption;
use Symfony\Component\Console\Output\OutputInterface;
use Symfony\Component\Lock\LockFactory;

/**
 * A cron job deployed on every node: the crontab line runs it everywhere at once, the
 * lock lets exactly one node do the work and the others skip. Each run writes what it
 * did to a journal (`--journal`), one line per event: node, pid, event, monotonic ns.
 */
final class NightlyReportCommand extends Command
{
    protected static $defaultName = 'app:nightly-report';

    public function __construct(private LockFactory $locks)
    {
        parent::__construct();
    }

    protected function configure(): void
    {
        $this->setName('app:nightly-report')
            ->setDescription('Builds the nightly report on exactly one node')
            ->addOption('node', null, InputOption::VALUE_REQUIRED, 'this node\'s name', gethostname() ?: 'node')
            ->addOption('journal', null, InputOption::VALUE_REQUIRED, 'file the run appends its events to', 'php://stdout')
            ->addOption('work', null, InputOption::VALUE_REQUIRED, 'seconds the report takes to build', '2');
    }

    protected function execute(InputInterface $input, OutputInterface $output): int
    {
        $node = (string) $input->getOption('node');
        $journal = (string) $input->getOption('journal');
        $log = function (string $event) use ($node, $journal): void {
            file_put_contents($journal, sprintf("%s %d %s %d\n", $node, getmypid(), $event, hrtime(true)), FILE_APPEND | LOCK_EX);
        };

        // 60 s TTL, refreshed while the report is built: a node that hangs loses the lock
        // a minute later, one that dies loses it at once (SharedLock mode).
        $lock = $this->locks->createLock('nightly-report', 60);
        if (!$lock->acquire()) {
            $log('skipped');
            $output->writeln("$node: another node builds the report", OutputInterface::VERBOSITY_VERBOSE);
            return Command::SUCCESS;
        }
        try {
            $log('started');
            $this->buildReport((float) $input->getOption('work'), fn () => $lock->refresh());
            $log('finished');
            $output->writeln("$node: report built", OutputInterface::VERBOSITY_VERBOSE);
        } finally {
            $lock->release();
        }
        return Command::SUCCESS;
    }

    /** Stands in for the real work: takes $seconds, refreshing the lock every second. */
    private function buildReport(float $seconds, callable $refresh): void
    {
        $end = microtime(true) + $seconds;
        while (($left = $end - microtime(true)) > 0) {
            usleep((int) (min($left, 1.0) * 1e6));
            $refresh();
        }
    }
}
