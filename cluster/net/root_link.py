"""An unshaped link from this machine's own namespace to an emulated network's bridge.

A private Slurm's controller and its client commands (sbatch, squeue, scancel, tfbench's
launcher) run in the machine's own namespace, while every node is an emulated host
(cluster.net.links). One veth pair joins the two: port "login" on the run's bridge, and
tfb<key>-login here with address .254 of the run's /24 (a "login node"). It is not shaped, so
the only shaped links are the hosts' own. Nothing else of the machine's is changed; the pair goes
with the switch namespace (deleting one end of a veth deletes the other), so removing the run's
namespaces, or `python -m cluster.net.netns --cleanup` after its owner died, removes it too.
"""
from __future__ import annotations

import socket

from cluster.net import links

PORT = "login"
HOST_PART = 254


def address(net: links.Network) -> str:
    return f"{links.subnet(net.key)}.{HOST_PART}"


def ifname(net: links.Network) -> str:
    """The end in this namespace: at most 15 characters (IFNAMSIZ)."""
    return f"tfb{net.key}-{PORT}"


def subnet_in_use(net: links.Network) -> bool:
    """Whether this namespace already has an address in the run's /24 (another run's link)."""
    from pyroute2 import IPRoute

    prefix = links.subnet(net.key) + "."
    with IPRoute() as ipr:
        return any((a.get_attr("IFA_ADDRESS") or "").startswith(prefix) for a in ipr.get_addr(family=socket.AF_INET))


def attach(net: links.Network) -> str:
    """Creates the pair (after links.build) and returns this namespace's address on the bridge."""
    from pyroute2 import IPRoute, NetNS

    with IPRoute() as ipr:
        ipr.link("add", ifname=ifname(net), kind="veth", peer={"ifname": PORT, "net_ns_fd": net.switch})
        (index,) = ipr.link_lookup(ifname=ifname(net))
        ipr.addr("add", index=index, address=address(net), prefixlen=links.PREFIXLEN)
        ipr.link("set", index=index, state="up")
    with NetNS(net.switch, flags=0) as sw:
        (port,) = sw.link_lookup(ifname=PORT)
        (bridge,) = sw.link_lookup(ifname=links.BRIDGE)
        sw.link("set", index=port, master=bridge, state="up")
    return address(net)


def detach(net: links.Network) -> None:
    """Deletes the pair now (removing the switch namespace would too, but asynchronously)."""
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        for index in ipr.link_lookup(ifname=ifname(net)):
            ipr.link("del", index=index)


def present(net: links.Network) -> bool:
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        return bool(ipr.link_lookup(ifname=ifname(net)))
