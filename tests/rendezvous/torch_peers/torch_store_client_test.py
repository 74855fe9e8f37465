"""(a) torch 1.13's own TCPStore client (is_master=False) against ddprund."""
import os
import sys
import threading
import time
from datetime import timedelta

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_common import Ddprund, fail, require_torch  # noqa: E402

require_torch()
from torch.distributed import PrefixStore, TCPStore  # noqa: E402


def expect(actual, wanted, what):
    if actual != wanted:
        fail("%s: got %r, wanted %r" % (what, actual, wanted))


def client(port, **kwargs):
    return TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=30), **kwargs)


def main():
    with Ddprund() as daemon:
        store = client(daemon.port)
        store.set("k1", "v1")
        expect(store.get("k1"), b"v1", "get")
        expect(store.add("cnt", 5), 5, "add on a missing key")
        expect(store.add("cnt", -7), -2, "add")
        expect(store.get("cnt"), b"-2", "add stores decimal ASCII")
        expect(store.compare_set("cas", "", "first"), b"first", "compare_set creating")
        expect(store.compare_set("cas", "wrong", "x"), b"first", "compare_set mismatch")
        expect(store.compare_set("cas", "first", "second"), b"second", "compare_set swap")
        expect(store.compare_set("missing", "zz", "v"), b"zz", "compare_set missing key")

        other = client(daemon.port)
        started = threading.Event()

        def late_setter():
            started.wait(10)
            other.set("late", "here")

        setter = threading.Thread(target=late_setter)
        setter.start()
        started.set()
        store.wait(["late", "k1"], timedelta(seconds=30))
        setter.join()
        expect(store.get("late"), b"here", "get after wait")

        expect(store.num_keys(), 4, "num_keys (k1, cnt, cas, late)")
        expect(store.delete_key("k1"), True, "delete_key existing")
        expect(store.delete_key("k1"), False, "delete_key missing")
        expect(store.num_keys(), 3, "num_keys after delete")

        prefixed = PrefixStore("pg", store)
        prefixed.set("a", "b")
        expect(other.get("pg/a"), b"b", "PrefixStore key seen by another client")

        # The world_size handshake: ADD "init/" +1 from each non-master client.
        client(daemon.port, world_size=2)
        client(daemon.port, world_size=2)
        expect(store.num_keys(), 5, "num_keys with init/ and pg/a")

        # A wait that times out raises on the client; a fresh client keeps working.
        impatient = client(daemon.port)
        t0 = time.monotonic()
        try:
            impatient.wait(["never"], timedelta(milliseconds=300))
            fail("wait on a missing key returned")
        except RuntimeError as e:
            if "timeout" not in str(e).lower():
                fail("unexpected wait error: %s" % e)
        if time.monotonic() - t0 > 20:
            fail("wait timeout took %.1f s" % (time.monotonic() - t0))
        expect(client(daemon.port).get("cas"), b"second", "data kept")
    print("torch 1.13 TCPStore client against ddprund: OK")


if __name__ == "__main__":
    main()
