"""The manifest is parsed once into typed records (Binding, Param, Kernel.rank), and bad entries
are refused by name; the native API's kernel order comes from the explicit `rank`, never from
the manifest's key order."""

import json
import shutil

import pytest

from wgattn import native, registry
from wgattn.errors import InterfaceMismatch

MANIFEST = json.loads((registry.shader_dir() / "manifest.json").read_text())
REG = registry.load()
OPS = sorted({a.reference for a in REG.abis.values()})


def _load_edited(tmp_path, edit):
    """registry.load of a copy of the manifest (beside the headers it reads) after `edit(raw)`."""
    raw = json.loads(json.dumps(MANIFEST))
    edit(raw)
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(raw))
    for folder in ("interfaces", "lib"):
        if not (tmp_path / folder).exists():
            shutil.copytree(registry.shader_dir() / folder, tmp_path / folder)
    return registry.load(path)


def _reversed(raw):
    """Both tables' key order reversed: every pair of kernels of one op swaps places, so an order
    taken from the keys (as before `rank`) changes wherever an op has two kernels."""
    for table in ("interfaces", "kernels"):
        raw[table] = dict(reversed(list(raw[table].items())))


@pytest.mark.parametrize("op", OPS)
def test_native_order_is_by_rank(op):
    kernels = native._kernels_for(op)
    assert {k.id for k in kernels} == {k.id for k in REG.kernels.values() if k.abi.reference == op}
    ranks = [k.rank for k in kernels]
    assert ranks == sorted(ranks, reverse=True) and len(set(ranks)) == len(ranks), list(zip(ranks, kernels))


@pytest.mark.parametrize("op", OPS)
def test_manifest_key_order_does_not_change_the_native_order(op, tmp_path, monkeypatch):
    shuffled = _load_edited(tmp_path, _reversed)
    assert list(shuffled.kernels) != list(REG.kernels)  # the edit did reorder
    assert [k.id for k in shuffled.ranked(op)] == [k.id for k in REG.ranked(op)]
    monkeypatch.setenv("WGATTN_SHADERS", str(tmp_path))  # native's own lookup reads the copy
    assert [k.id for k in native._kernels_for(op)] == [k.id for k in REG.ranked(op)]


@pytest.mark.parametrize(
    "rank, message",
    [
        (None, "'rank' is missing"),
        ("10", "'rank' must be int, got '10'"),
        (True, "'rank' must be int, got True"),
        (2.5, "'rank' must be int, got 2.5"),
    ],
)
def test_rank_must_be_an_int(tmp_path, rank, message):
    def edit(raw):
        if rank is None:
            del raw["kernels"]["flash_fwd.tiled"]["rank"]
        else:
            raw["kernels"]["flash_fwd.tiled"]["rank"] = rank

    with pytest.raises(ValueError, match=rf"kernels\.flash_fwd\.tiled: {message}"):
        _load_edited(tmp_path, edit)


def test_rank_must_be_unique_per_op(tmp_path):
    def edit(raw):
        raw["kernels"]["varlen_fwd.seed"]["rank"] = raw["kernels"]["flash_fwd.blocked"]["rank"]

    with pytest.raises(ValueError, match=r"kernels\.(varlen_fwd\.seed|flash_fwd\.blocked): rank \d+ is also kernels\."):
        _load_edited(tmp_path, edit)

    def other_op(raw):  # a rank shared across ops orders nothing: allowed
        raw["kernels"]["attn_probs.seed"]["rank"] = raw["kernels"]["flash_fwd.blocked"]["rank"]

    _load_edited(tmp_path, other_op)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda r: r["interfaces"]["attn_probs"]["passes"][0].update(uses=[0, 9]), r"attn_probs\.passes\[0\]: uses"),
        (lambda r: r["kernels"]["attn_probs.seed"].update(interface="nope"), r"kernels\.attn_probs\.seed: interface 'nope'"),
        (lambda r: r["kernels"]["attn_probs.seed"]["overrides"].update(WG=[64]), r"attn_probs\.seed\.overrides: 'WG' must be"),
        (lambda r: r["kernels"]["attn_probs.seed"].update(caps={"WG": 64}), r"attn_probs\.seed: unknown keys \['caps'\]"),
        (lambda r: r["kernels"]["attn_probs.seed"].update(storage="4 * WG"), r"attn_probs\.seed: unknown keys \['storage'\]"),
        (lambda r: r["kernels"]["attn_probs.seed"].update(matrix={"component": "f16"}), r"attn_probs\.seed\.matrix: 'result'"),
    ],
    ids=["uses", "interface", "override", "caps", "storage", "matrix"],
)
def test_bad_entries_are_refused_by_name(tmp_path, edit, message):
    with pytest.raises(ValueError, match=message):
        _load_edited(tmp_path, edit)


def test_records_are_typed():
    iface = REG.abi("attn_probs")
    params = iface.bindings[0]
    assert (params.binding, params.name, params.kind, params.struct, params.buffer_type) == (
        0,
        "params",
        "uniform",
        "Params",
        "uniform",
    )
    probs = iface.bindings[3]
    assert (probs.name, probs.access, probs.element, probs.buffer_type) == ("probs", "read_write", "f32", "storage")
    assert iface.bindings[1].buffer_type == "read-only-storage"
    assert [(p.name, p.type, p.offset) for p in iface.params[:2]] == [("head_dim", "u32", 0), ("n_heads", "u32", 4)]
    assert iface.params[-1].padding and iface.params_size == 32


def test_bind_matches_buffers_to_bindings_by_name():
    iface = REG.abi("attn_probs")
    assert iface.bind(["probs", "q", "k_hist", "params"]) == {0: "params", 1: "q", 2: "k_hist", 3: "probs"}
    with pytest.raises(InterfaceMismatch, match=r"without a buffer: \['probs'\]; bound to nothing: \['out'\]"):
        iface.bind(["params", "q", "k_hist", "out"])
