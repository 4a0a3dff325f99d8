/*
 * One thread-safe (ZTS) PHP process serving many requests on several threads at once,
 * as a threaded server (FrankenPHP, Apache's worker MPM) does: PHP's embed SAPI started
 * once, then each thread gets its own PHP context (ts_resource) and runs REQUESTS
 * requests of SCRIPT one after the other, each with its own request startup and
 * shutdown, while the other threads run theirs. The script gets $argv = [SCRIPT, thread,
 * request, ARGS...] and ends with exit(0) when all is well; anything else fails the run.
 *
 *   threads THREADS REQUESTS SCRIPT [ARGS...]
 *
 * The extension and its settings come from the ini files of PHP_INI_SCAN_DIR.
 *
 * MYSQLLOCK_ZTS_BREAK=rshutdown: the harness takes the mysqllock module's request
 * shutdown hook away after startup, as a worker-mode server that never ends a request
 * does; the test must then fail (locks outlive their request).
 */
/* As PHP itself is built: its headers use GNU extensions (memrchr). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sapi/embed/php_embed.h>

#define MAX_THREADS 64

struct job {
    pthread_t id;
    int thread;
    int requests;
    const char *script;
    int nargs;
    char **args;
    int failed_request; /* -1: none failed */
    int status;
};

/* One request of SCRIPT on the calling thread: startup, the script, shutdown. Returns
 * the script's exit status (255 when the request could not start). */
static int run_request(struct job *job, int request)
{
    char thread_arg[16], request_arg[16];
    char *argv[3 + 32];
    int argc = 0, status;
    zend_file_handle handle;

    snprintf(thread_arg, sizeof thread_arg, "%d", job->thread);
    snprintf(request_arg, sizeof request_arg, "%d", request);
    argv[argc++] = (char *)job->script;
    argv[argc++] = thread_arg;
    argv[argc++] = request_arg;
    for (int i = 0; i < job->nargs; i++) {
        argv[argc++] = job->args[i];
    }

    SG(options) |= SAPI_OPTION_NO_CHDIR;
    SG(request_info).argc = argc;
    SG(request_info).argv = argv;
    SG(request_info).path_translated = (char *)job->script;
    if (php_request_startup() == FAILURE) {
        fprintf(stderr, "threads: thread %d request %d: php_request_startup failed\n", job->thread, request);
        return 255;
    }
    SG(headers_sent) = 1;
    SG(request_info).no_headers = 1;

    zend_stream_init_filename(&handle, job->script);
    zend_first_try {
        php_execute_script(&handle);
    } zend_end_try();
    status = EG(exit_status);
    zend_destroy_file_handle(&handle);

    php_request_shutdown(NULL);
    SG(request_info).argv = NULL;
    SG(request_info).argc = 0;
    return status;
}

/* The extension's request shutdown hook under MYSQLLOCK_ZTS_BREAK=rshutdown. The engine
 * calls the hooks it collected at startup through the module entry, so the entry keeps
 * a function (this one) rather than NULL. */
static zend_result skip_request_shutdown(int type, int module_number)
{
    (void)type;
    (void)module_number;
    return SUCCESS;
}

static void *serve(void *arg)
{
    struct job *job = arg;

    /* This thread's own PHP context: globals, executor, its requests. */
    ts_resource(0);
    for (int request = 0; request < job->requests; request++) {
        int status = run_request(job, request);
        if (status != 0) {
            job->failed_request = request;
            job->status = status;
            break;
        }
    }
    ts_free_thread();
    return NULL;
}

int main(int argc, char **argv)
{
    struct job jobs[MAX_THREADS];
    int threads, requests, failed = 0;
    const char *brk = getenv("MYSQLLOCK_ZTS_BREAK");

    if (argc < 4) {
        fprintf(stderr, "usage: threads THREADS REQUESTS SCRIPT [ARGS...]\n");
        return 2;
    }
    threads = atoi(argv[1]);
    requests = atoi(argv[2]);
    if (threads < 1 || threads > MAX_THREADS || requests < 1 || argc - 4 > 32) {
        fprintf(stderr, "threads: 1 to %d threads, at least one request, at most 32 ARGS\n", MAX_THREADS);
        return 2;
    }

    /* Module startup (and a first request on this thread, which stays idle). */
    if (php_embed_init(argc, argv) == FAILURE) {
        fprintf(stderr, "threads: php_embed_init failed\n");
        return 1;
    }
    zend_module_entry *module = zend_hash_str_find_ptr(&module_registry, "mysqllock", strlen("mysqllock"));
    if (module == NULL) {
        fprintf(stderr, "threads: the mysqllock extension is not loaded (PHP_INI_SCAN_DIR)\n");
        php_embed_shutdown();
        return 1;
    }
    if (brk != NULL && strcmp(brk, "rshutdown") == 0) {
        fprintf(stderr, "threads: MYSQLLOCK_ZTS_BREAK=rshutdown: the extension's request shutdown will not run\n");
        module->request_shutdown_func = skip_request_shutdown;
    }

    for (int t = 0; t < threads; t++) {
        jobs[t] = (struct job){
            .thread = t, .requests = requests, .script = argv[3],
            .nargs = argc - 4, .args = argv + 4, .failed_request = -1,
        };
        if (pthread_create(&jobs[t].id, NULL, serve, &jobs[t]) != 0) {
            fprintf(stderr, "threads: pthread_create failed\n");
            return 1;
        }
    }
    for (int t = 0; t < threads; t++) {
        pthread_join(jobs[t].id, NULL);
        if (jobs[t].failed_request >= 0) {
            fprintf(stderr, "threads: thread %d: request %d ended with status %d\n",
                    t, jobs[t].failed_request, jobs[t].status);
            failed = 1;
        }
    }
    php_embed_shutdown();
    if (!failed) {
        printf("threads: %d threads x %d requests, all ended with status 0\n", threads, requests);
    }
    return failed;
}
