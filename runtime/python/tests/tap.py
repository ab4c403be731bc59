"""A small TAP harness: every `test_*` function of a module is one test point; a test that
raises (an assert or anything else) is `not ok` with the traceback as diagnostics; `skip(why)`
inside a test makes it `ok ... # SKIP why`; `skip_all(why)` before running prints `1..0 # SKIP`. TAP_ONLY=text runs only the tests whose name
contains text."""
import os
import sys
import traceback


class Skip(Exception):
    pass


def skip(why):
    raise Skip(why)


def skip_all(why):
    print(f"1..0 # SKIP {why}")
    sys.exit(0)


def run(module_globals):
    only = os.environ.get("TAP_ONLY")  # run only the tests whose name contains it
    tests = [(n, f) for n, f in module_globals.items() if n.startswith("test_") and callable(f)
             and (not only or only in n)]
    failed = 0
    for i, (name, fn) in enumerate(tests, 1):
        doc = (fn.__doc__ or "").strip().splitlines()
        label = name[5:] + (f" - {doc[0]}" if doc else "")
        try:
            fn()
            print(f"ok {i} - {label}")
        except Skip as e:
            print(f"ok {i} - {label} # SKIP {e}")
        except Exception:  # noqa: BLE001 - every failure is reported, none stops the run
            failed += 1
            print(f"not ok {i} - {label}")
            for line in traceback.format_exc().rstrip().splitlines():
                print(f"# {line}")
        sys.stdout.flush()
    print(f"1..{len(tests)}")
    return 1 if failed else 0
