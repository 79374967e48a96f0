"""Two ranks under torch.distributed (gloo): equal batch counts, disjoint samples
covering the epoch, global reshuffle by set_epoch; folder and shard sources."""
import json
import os
import socket
import subprocess
import sys

import pytest

SCRIPT = r"""
import json, os, sys
import torch.distributed as dist
import torch.multiprocessing as mp

def worker(rank, world, port, pkg, source, drop_last, out):
    sys.path.insert(0, pkg)
    import stoker
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    # No rank/world_size given: they come from the process group.
    loader = stoker.Loader(source, batch_size=4, shuffle=True, seed=1, drop_last=drop_last,
                           transforms=[stoker.CenterCrop(8)], threads=1)
    result = {}
    for epoch in (0, 1):
        loader.set_epoch(epoch)
        ids = [int(v) for _, y in loader for v in y]
        got = [None] * world
        dist.all_gather_object(got, {"rank": loader.rank, "world": loader.world_size, "len": len(loader), "ids": ids})
        result[epoch] = got
    if rank == 0:
        json.dump(result, open(out, "w"))
    dist.barrier()
    dist.destroy_process_group()

if __name__ == "__main__":
    port, pkg, source, drop_last, out = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4] == "1", sys.argv[5]
    mp.spawn(worker, args=(2, port, pkg, source, drop_last, out), nprocs=2, join=True)
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("kind", ["folder", "shards"])
@pytest.mark.parametrize("drop_last", [False, True])
def test_two_gloo_ranks(numbered, numbered_shards, tmp_path, kind, drop_last):
    source = numbered if kind == "folder" else numbered_shards
    script = tmp_path / "dist.py"
    script.write_text(SCRIPT)
    out = tmp_path / "out.json"
    pkg = os.path.join(os.path.dirname(__file__), "..", "..", "python")
    subprocess.run([sys.executable, str(script), str(free_port()), pkg, source, "1" if drop_last else "0", str(out)],
                   check=True, timeout=300)
    result = json.load(open(out))
    epochs = []
    for epoch in ("0", "1"):
        r0, r1 = result[epoch]
        assert (r0["rank"], r1["rank"], r0["world"]) == (0, 1, 2)
        assert r0["len"] == r1["len"] and len(r0["ids"]) == len(r1["ids"]), "equal batch and sample counts"
        both = r0["ids"] + r1["ids"]
        if drop_last:
            assert not set(r0["ids"]) & set(r1["ids"]) and len(set(both)) == len(both)
            assert len(both) == 32  # floor(37 / 2) = 18 per rank, cut to 4 full batches of 4
        else:
            assert set(both) == set(range(37)) and len(both) == 38, "37 samples + 1 padding"
        epochs.append(r0["ids"])
    assert epochs[0] != epochs[1], "set_epoch reshuffles"
