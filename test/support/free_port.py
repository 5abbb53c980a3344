#!/usr/bin/env python3
"""Prints a free TCP port on 127.0.0.1 for a test service to listen on.

The port is taken below the kernel's ephemeral range (net.ipv4.ip_local_port_range), never from it: a port
the kernel picked for bind(0) and that was closed again may be handed to an outgoing connection before the
service binds it, and the service (which refuses a port in use) would fail to start. test/support/process.cc
(FreePort) follows the same rule.
"""
import random
import socket


def ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def main():
    low, high = 10000, max(10001, ephemeral_low())
    for _ in range(1000):
        port = random.randrange(low, high)
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            s.close()
        print(port)
        return
    s = socket.socket()  # nothing free below the range: the kernel's choice
    s.bind(("127.0.0.1", 0))
    print(s.getsockname()[1])
    s.close()


if __name__ == "__main__":
    main()
