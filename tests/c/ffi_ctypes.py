"""The C API through Python's ctypes: a real lock, contention with a second client, and
a release; then a fencing token from mysqllock_acquire_ex with the options struct, on an
upgraded table of the script's own (dropped at the end with the mariadb client). The
status and flag numbers are read from the header, so a drift between the header and the
library shows up here.

Environment: MYSQLLOCK_TEST_DSN, MYSQLLOCK_LIB (libmysqllock.so), MYSQLLOCK_HEADER.
Prints "ok - ..." / "not ok - ..." lines; exits 1 if any check failed.
"""
import ctypes
import os
import re
import subprocess
import sys
from urllib.parse import unquote, urlsplit

failures = 0


def check(passed, name):
    global failures
    print(("ok - " if passed else "not ok - ") + "ctypes: " + name, flush=True)
    failures += 0 if passed else 1


def enum_constants(header, type_name):
    """The constants of the typedef'd enum `type_name`, as cbindgen writes them."""
    body = re.search(r"typedef enum \{([^{}]*)\} " + type_name + ";", header)[1]
    return {m[0]: int(m[1]) for m in re.findall(r"^\s*(MYSQLLOCK_\w+) = (\d+),$", body, re.M)}


with open(os.environ["MYSQLLOCK_HEADER"], encoding="utf-8") as f:
    HEADER = f.read()
STATUS = enum_constants(HEADER, "mysqllock_status")
FLAG = enum_constants(HEADER, "mysqllock_option_flag")


class Options(ctypes.Structure):
    """mysqllock_options, field for field."""
    _fields_ = [("flags", ctypes.c_uint32), ("max_hold", ctypes.c_double), ("at_least", ctypes.c_double)]


lib = ctypes.CDLL(os.environ["MYSQLLOCK_LIB"])
Client = ctypes.c_void_p  # opaque: only ever passed back
c_status = ctypes.c_int
for fn, args in {
    "mysqllock_client_open_url": [ctypes.c_char_p, ctypes.POINTER(Client)],
    "mysqllock_acquire": [Client, ctypes.c_char_p, ctypes.c_double, ctypes.c_double],
    "mysqllock_try_acquire": [Client, ctypes.c_char_p, ctypes.c_double, ctypes.POINTER(ctypes.c_bool)],
    "mysqllock_release": [Client, ctypes.c_char_p],
    "mysqllock_remaining_ttl": [Client, ctypes.c_char_p, ctypes.POINTER(ctypes.c_double)],
    "mysqllock_upgrade_table": [Client, ctypes.POINTER(ctypes.c_bool)],
    "mysqllock_acquire_ex": [Client, ctypes.c_char_p, ctypes.c_double, ctypes.c_double, ctypes.POINTER(Options),
                             ctypes.POINTER(ctypes.c_uint64)],
    "mysqllock_token": [Client, ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint64)],
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


def open_client(query=""):
    client = Client()
    status = lib.mysqllock_client_open_url((os.environ["MYSQLLOCK_TEST_DSN"] + query).encode(), ctypes.byref(client))
    if status != STATUS["MYSQLLOCK_OK"]:
        sys.exit("cannot open a client: " + last_error())
    return client


check(len(STATUS) == 13 and STATUS["MYSQLLOCK_OK"] == 0 and STATUS["MYSQLLOCK_DEADLOCK"] == 12,
      "the header declares the thirteen statuses")
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

check(FLAG == {"MYSQLLOCK_KEEP_ALIVE": 1}, "the header declares the keep-alive flag")
table = f"py_{os.getpid()}_fenced"
f = open_client(f"?table={table}")
changed = ctypes.c_bool(False)
check(lib.mysqllock_upgrade_table(f, ctypes.byref(changed)) == STATUS["MYSQLLOCK_OK"] and changed.value,
      "upgrade_table creates an upgraded table")
token, held = ctypes.c_uint64(0), ctypes.c_uint64(0)
options = Options(flags=FLAG["MYSQLLOCK_KEEP_ALIVE"], max_hold=60)
check(lib.mysqllock_acquire_ex(f, name, 0, 30, ctypes.byref(options), ctypes.byref(token)) == STATUS["MYSQLLOCK_OK"]
      and token.value > 0, f"acquire_ex with keep-alive hands out a token ({token.value})")
check(lib.mysqllock_token(f, name, ctypes.byref(held)) == STATUS["MYSQLLOCK_OK"] and held.value == token.value,
      "mysqllock_token returns the same token")
check(lib.mysqllock_release(f, name) == STATUS["MYSQLLOCK_OK"], "release the kept-alive lock")
check(lib.mysqllock_acquire_ex(f, name, 0, 30, None, ctypes.byref(held)) == STATUS["MYSQLLOCK_OK"]
      and held.value > token.value, f"the next acquisition gets a greater token ({held.value})")
lib.mysqllock_release(f, name)
lib.mysqllock_client_free(f)

url = urlsplit(os.environ["MYSQLLOCK_TEST_DSN"])
dropped = subprocess.run(
    ["mariadb", "--no-defaults", "-h", url.hostname, "-P", str(url.port), "-u", unquote(url.username),
     "-e", f"DROP TABLE {table}", url.path.lstrip("/")],
    env={**os.environ, "MYSQL_PWD": unquote(url.password)}, capture_output=True, text=True)
check(dropped.returncode == 0, "drop the upgraded table" + (": " + dropped.stderr.strip() if dropped.stderr else ""))
sys.exit(1 if failures else 0)
