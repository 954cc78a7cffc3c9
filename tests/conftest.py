"""Shared fixtures for the Python tests, and which of them are slow."""

from fnmatch import fnmatch

import pytest

# The slow tier: tests that take seconds each (whole conformance grids on a software adapter, JAX
# compiling each oracle case, hypothesis sending hundreds of requests, servers, builds). `make test`
# (and CI) runs them; `make test-fast`, the developer's loop, leaves them out. Keyed by file and
# test function (every parametrization of it); a name here that matches no collected test is an
# error, so a renamed test cannot leave the tier silently.
SLOW = {
    "test_api_fuzz.py": ("*",),
    "test_bench_cli.py": ("test_json_records",),
    "test_bench_decode.py": ("test_smoke_run_records_checked_figures",),
    "test_check.py": ("test_project_kernels_pass_with_json", "test_planted_*"),
    "test_devcarry.py": ("*",),
    "test_js_typecheck.py": ("test_planted_type_errors_fail_the_check",),
    "test_localise.py": ("test_a_kernel_trusting_tanh_is_caught_and_explained",),
    "test_loop_probe.py": ("*",),
    "test_make_demo.py": ("*",),
    "test_native_attn_probs_batched.py": (
        "test_kernel_matches_reference",
        "test_blocks_fold_past_65535_workgroups",
        "test_planted_*",
        "test_other_workgroup_sizes",
    ),
    "test_native_decode.py": (
        "test_kernel_matches_reference",
        "test_planted_bugs_are_caught",
        "test_the_native_api_runs_decode",
    ),
    "test_native_flash_fwd.py": ("test_kernel_matches_reference", "test_planted_tiling_bugs_are_caught"),
    "test_native_prefill.py": (
        "test_kernel_matches_reference",
        "test_planted_bugs_are_caught",
        "test_the_native_api_runs_prefill_past_decode_s_new_tokens",
    ),
    "test_native_grids.py": ("test_trusted_kernel_passes_its_grid_checked",),
    "test_native_runtime_bounds.py": ("test_many_shapes_keep_the_runtime_cache_under_its_bound",),
    "test_native_threads.py": ("test_pipelines_are_created_on_one_thread_while_another_runs",),
    "test_native_varlen_bwd.py": (
        "test_kernel_matches_reference",
        "test_folded_grid_past_65535_workgroups",
        "test_unplanted_tiled_kernel_passes_the_same_loop",
        "test_planted_tiling_bugs_are_caught",
        "test_planted_alibi_and_sinks_bugs_are_caught",
    ),
    "test_native_varlen_fwd.py": ("test_conformance_case", "test_grid_folded_past_65535_workgroups"),
    "test_reference_oracle.py": ("test_varlen_against_oracle_autodiff", "test_sdpa_against_oracle", "test_decode_against_oracle"),
    "test_reliability_compiles.py": ("test_a_*", "test_clients_*", "test_the_start_up_*"),
    "test_reliability_ranges.py": ("*",),
    "test_reliability_server.py": ("*",),
    "test_schema_fuzz.py": ("*",),
    "test_test_hygiene.py": ("test_oracle_report_does_not_depend_on_order",),
    "test_wheel.py": ("*",),
}


@pytest.hookimpl(tryfirst=True)  # before -m and -k deselect anything
def pytest_collection_modifyitems(items):
    modules = {}
    for item in items:
        path, _, rest = item.nodeid.partition("::")
        if not path.startswith("tests/"):
            continue
        file = path[len("tests/") :]
        modules.setdefault(file, getattr(item, "module", None))
        if any(fnmatch(rest.split("[")[0], pattern) for pattern in SLOW.get(file, ())):
            item.add_marker(pytest.mark.slow)
    # Checked against the test functions each module defines, whichever of them were selected.
    stale = [
        f"{file}::{pattern}"
        for file, mod in modules.items()
        for pattern in SLOW.get(file, ())
        if mod is not None and not any(fnmatch(name, pattern) for name in dir(mod) if name.startswith("test"))
    ]
    if stale:
        raise pytest.UsageError(f"tests/conftest.py's SLOW names tests that no longer exist: {stale}")


@pytest.fixture(scope="session")
def native_runtime():
    """The process's native runtime; skips (with the reason) where wgpu-py has no usable adapter."""
    wgpu = pytest.importorskip("wgpu", reason="wgpu-py is not installed")
    del wgpu
    from wgattn import native

    try:
        return native.runtime()
    except native.AdapterError as exc:
        pytest.skip(f"no usable native adapter: {exc}")
