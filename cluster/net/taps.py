"""TAP devices of a delayed link: created with pyroute2, their fds attached with TUNSETIFF.

A delayed host has no veth: its eth0 is a TAP device in the host namespace and its switch port
h<i> a TAP device in the switch namespace, and the delay line (cluster.net.delay_line) carries
frames between the two fds. Both are opened with a virtio-net header and TSO/checksum offload
(TUNSETOFFLOAD), as a VM's tap is: the kernel then hands over the same TSO packets of up to
64 KB that it would put on a veth, one read each, instead of 1514-byte frames, which a Python
forwarder could not move at more than a few hundred Mbit/s. The MTU stays 1500, so TCP sees the
Ethernet MSS; tbf on a TAP device cuts a TSO packet bigger than its burst into frames before
the forwarder reads them, as it does on a veth.

A persistent TAP device lives until its namespace is removed; its fd is opened and attached in
that namespace (TUNSETIFF looks the name up in the namespace the fd was opened in). A device can
also be moved to another namespace with its fd attached and keeps working, but opening each in
place needs no rename. An attached fd holds a reference on its namespace: the namespace only
really goes once the delay line holding the fd is dead, which is why it lives in the switch
namespace, where netns.remove_namespaces kills it first.
"""
from __future__ import annotations

import fcntl
import os
import struct
from typing import Optional

from cluster.net.netns_exec import run_in

TUN_DEVICE = "/dev/net/tun"
TUNSETIFF = 0x400454CA
TUNSETOFFLOAD = 0x400454D0
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000
IFF_VNET_HDR = 0x4000
TUN_F_CSUM, TUN_F_TSO4, TUN_F_TSO6 = 0x01, 0x02, 0x04
OFFLOADS = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6
VNET_HDR_LEN = 10  # struct virtio_net_hdr, the default header size
MTU = 1500


def attach(ifname: str) -> int:
    """A non-blocking fd on TAP device `ifname` of the calling thread's namespace, with the
    virtio-net header and TSO offload switched on."""
    fd = os.open(TUN_DEVICE, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", ifname.encode(), IFF_TAP | IFF_NO_PI | IFF_VNET_HDR))
        fcntl.ioctl(fd, TUNSETOFFLOAD, OFFLOADS)
    except OSError:
        os.close(fd)
        raise
    return fd


def add(ipr, ifname: str) -> int:
    """Creates a persistent TAP device `ifname` in ipr's namespace; its index."""
    ipr.link("add", ifname=ifname, kind="tuntap", mode="tap",
             ifr={"no_pi": True, "vnet_hdr": True, "one_queue": False, "multi_queue": False})
    (index,) = ipr.link_lookup(ifname=ifname)
    ipr.link("set", index=index, mtu=MTU)
    return index


def create(ns: str, ifname: str) -> int:
    """TAP device `ifname` created in namespace `ns` and an fd attached to it (in a thread that
    enters the namespace, so neither pyroute2 nor the ioctl needs a child process)."""
    def make() -> int:
        from pyroute2 import IPRoute

        with IPRoute() as ipr:
            add(ipr, ifname)
        return attach(ifname)

    return run_in(ns, make)


def support_error() -> Optional[str]:
    """Why TAP devices cannot be made here (tried in the calling thread's namespace), or None;
    meant for a throwaway namespace: the probe's device is left for the namespace to take."""
    if not os.path.exists(TUN_DEVICE):
        return f"{TUN_DEVICE} is missing (CONFIG_TUN, or mknod {TUN_DEVICE} c 10 200)"
    try:
        from pyroute2 import IPRoute

        with IPRoute() as ipr:
            add(ipr, "tfbprobe")
        os.close(attach("tfbprobe"))
    except Exception as e:  # noqa: BLE001 - the reason is what the caller reports
        return f"cannot create a TAP device with offloads: {e}"
    return None
