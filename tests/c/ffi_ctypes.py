"""The C API through Python's ctypes: a real lock, contention with a second client, and
a release. The status numbers are read from the header, so a drift between the header
and the library shows up here.

Environment: MYSQLLOCK_TEST_DSN, MYSQLLOCK_LIB (libmysqllock.so), MYSQLLOCK_HEADER.
Prints "ok - ..." / "not ok - ..." lines; exits 1 if any check failed.
"""
import ctypes
import os
import re
import sys

failures = 0


def check(passed, name):
    global failures
    print(("ok - " if passed else "not ok - ") + "ctypes: " + name, flush=True)
    failures += 0 if passed else 1


with open(os.environ["MYSQLLOCK_HEADER"], encoding="utf-8") as f:
    STATUS = {m[0]: int(m[1]) for m in re.findall(r"^\s*(MYSQLLOCK_\w+) = (\d+),$", f.read(), re.M)}

lib = ctypes.CDLL(os.environ["MYSQLLOCK_LIB"])
Client = ctypes.c_void_p  # opaque: only ever passed back
c_status = ctypes.c_int
for fn, args in {
    "mysqllock_client_open_url": [ctypes.c_char_p, ctypes.POINTER(Client)],
    "mysqllock_acquire": [Client, ctypes.c_char_p, ctypes.c_double, ctypes.c_double],
    "mysqllock_try_acquire": [Client, ctypes.c_char_p, ctypes.c_double, ctypes.POINTER(ctypes.c_bool)],
    "mysqllock_release": [Client, ctypes.c_char_p],
    "mysqllock_remaining_ttl": [Client, ctypes.c_char_p, ctypes.POINTER(ctypes.c_double)],
}.items():
    getattr(lib, fn).argtypes = args
    getattr(lib, fn).restype = c_status
lib.mysqllock_client_free.argtypes = [Client]
lib.mysqllock_client_free.restype = None
lib.mysqllock_last_error.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]
lib.mysqllock_last_error.restype = ctypes.c_size_t
lib.mysqllock_status_name.argtypes = [ctypes.c_int]
lib.mysqllock_status_name.restype = ctypes.c_char_p


def last_error():
    size = lib.mysqllock_last_error(None, 0, None) + 1
    buf = ctypes.create_string_buffer(size)
    lib.mysqllock_last_error(buf, size, None)
    return buf.value.decode()


def open_client():
    client = Client()
    status = lib.mysqllock_client_open_url(os.environ["MYSQLLOCK_TEST_DSN"].encode(), ctypes.byref(client))
    if status != STATUS["MYSQLLOCK_OK"]:
        sys.exit("cannot open a client: " + last_error())
    return client


check(len(STATUS) == 10 and STATUS["MYSQLLOCK_OK"] == 0, "the header declares the ten statuses")
check(lib.mysqllock_status_name(STATUS["MYSQLLOCK_NOT_HELD"]) == b"MYSQLLOCK_NOT_HELD",
      "status numbers in the header match the library")

a, b = open_client(), open_client()
name = f"py-{os.getpid()}-ctypes".encode()
acquired = ctypes.c_bool(True)
remaining = ctypes.c_double(0)

check(lib.mysqllock_acquire(a, name, 0, 30) == STATUS["MYSQLLOCK_OK"], "acquire")
check(lib.mysqllock_remaining_ttl(a, name, ctypes.byref(remaining)) == STATUS["MYSQLLOCK_OK"]
      and 25 < remaining.value <= 31, f"remaining TTL ({remaining.value:.3f})")
check(lib.mysqllock_try_acquire(b, name, 30, ctypes.byref(acquired)) == STATUS["MYSQLLOCK_OK"]
      and not acquired.value, "a second client's try_acquire reports not acquired")
check(lib.mysqllock_acquire(b, name, 0.2, 30) == STATUS["MYSQLLOCK_TIMEOUT"]
      and name.decode() in last_error(), "a second client's acquire times out, naming the lock")
check(lib.mysqllock_release(a, name) == STATUS["MYSQLLOCK_OK"], "release")
check(lib.mysqllock_release(a, name) == STATUS["MYSQLLOCK_NOT_HELD"] and "not held" in last_error(),
      "a second release is NOT_HELD")
check(lib.mysqllock_try_acquire(b, name, 30, ctypes.byref(acquired)) == STATUS["MYSQLLOCK_OK"]
      and acquired.value, "the second client gets the released lock")
check(lib.mysqllock_release(b, name) == STATUS["MYSQLLOCK_OK"], "the second client releases it")
check(lib.mysqllock_acquire(None, name, 0, 30) == STATUS["MYSQLLOCK_INVALID_ARGUMENT"]
      and "NULL" in last_error(), "a NULL client is INVALID_ARGUMENT")

lib.mysqllock_client_free(a)
lib.mysqllock_client_free(b)
sys.exit(1 if failures else 0)
