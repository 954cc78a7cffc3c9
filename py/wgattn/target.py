"""The adapter a plan is built for, and the one answer to "can it run this kernel, and if not why".

A `Target` is what a runtime knows of its device: the WebGPU features it was given, its limits
(kebab-case names, as wgpu-py and WebGPU's JS spelling turned to kebab case give them), whether
it is a software adapter (lavapipe, SwiftShader: other tile shapes win there) and the subgroup
matrix configurations it offers. Plans are built for a target passed explicitly
(`Interface.plan(kernel, case, target)`): tile shapes are chosen to fit it, and nothing global
changes when a runtime is made. wgattn.native makes the target of its wgpu-py device, the page's
session the target of the browser's (`Target.from_json`, what static/webgpu.js reports).

    target.lacks(kernel)   why the adapter cannot run a kernel at all (a feature, a subgroup
                           matrix configuration, the shader file), or ""
    target.why_not(plan)   why it cannot run a plan (that, or a buffer, the workgroup grid, the
                           workgroup storage or invocations over its limits), or ""

A plan carries the answer for the target it was built for (`Plan.unavailable`): the page reads it
and decides nothing itself; wgattn.native asks `why_not` of its own target before every run.
Python 3.8 (the page's Pyodide).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, FrozenSet, List, Mapping, Optional, Protocol, Tuple, TypedDict

if TYPE_CHECKING:
    from pathlib import Path

    from .plan import Plan


class _Kernel(Protocol):
    """What `lacks` reads of a kernel (wgattn.registry.Kernel)."""

    @property
    def id(self) -> str: ...
    @property
    def requires(self) -> Tuple[str, ...]: ...
    @property
    def matrix(self) -> Optional[Tuple[str, str]]: ...
    @property
    def path(self) -> "Path": ...


__all__ = ["Target", "TargetJson", "MatrixConfig", "WEBGPU_LIMITS", "MATRIX_FEATURE", "DEFAULT"]

# Software adapters, by the words an adapter gives for itself: they run invocations as CPU lanes.
_SOFTWARE = re.compile(r"swiftshader|llvmpipe|lavapipe", re.I)


class MatrixConfigJson(TypedDict):
    """GPUAdapterInfo.subgroupMatrixConfigs' entries, as WebGPU spells them."""

    componentType: str
    resultComponentType: str
    M: int
    N: int
    K: int


class _TargetJson(TypedDict):
    name: str
    words: List[str]  # the adapter's vendor, architecture, device, description (software adapters name themselves)
    features: List[str]
    limits: Dict[str, int]  # kebab-case limit names


class TargetJson(_TargetJson, total=False):
    """What static/webgpu.js reports of the browser's device (Target.from_json reads it)."""

    software: bool  # when known; else read from `words`
    subgroup_matrix_configs: List[MatrixConfigJson]
    subgroup_min_size: int  # GPUAdapterInfo's, where the browser gives them (0: not given)
    subgroup_max_size: int


# WebGPU's default limits: what every adapter offers (the spec's "default" column).
WEBGPU_LIMITS: Dict[str, int] = {
    "max-compute-workgroup-storage-size": 16384,
    "max-compute-invocations-per-workgroup": 256,
    "max-compute-workgroup-size-x": 256,
    "max-compute-workgroups-per-dimension": 65535,
    "max-storage-buffer-binding-size": 134217728,
    "max-uniform-buffer-binding-size": 65536,
    "max-buffer-size": 268435456,
    "max-storage-buffers-per-shader-stage": 8,
}
# Chromium's experimental subgroup matrices (tensor cores from WGSL); a kernel that uses them
# names the component and result types it needs, and the plan picks a configuration offering them.
MATRIX_FEATURE = "chromium-experimental-subgroup-matrix"


@dataclass(frozen=True)
class MatrixConfig:
    """One entry of GPUAdapterInfo.subgroupMatrixConfigs: M x K times K x N of `component`,
    accumulated in `result`."""

    component: str  # "f16", "f32", "i8", ...
    result: str
    m: int
    n: int
    k: int

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "MatrixConfig":
        """From WebGPU's {componentType, resultComponentType, M, N, K}."""
        try:
            return cls(str(obj["componentType"]), str(obj["resultComponentType"]), int(obj["M"]), int(obj["N"]), int(obj["K"]))
        except (KeyError, TypeError, ValueError):
            raise ValueError(
                f"a subgroup matrix configuration is {{componentType, resultComponentType, M, N, K}}, got {obj!r}"
            ) from None


@dataclass(frozen=True)
class Target:
    """What plans are built for and checked against: an adapter's features, limits and kind."""

    features: FrozenSet[str] = frozenset()
    limits: Mapping[str, int] = field(default_factory=lambda: dict(WEBGPU_LIMITS))
    software: bool = False  # a CPU adapter (lavapipe, SwiftShader): its own tile candidates
    matrix_configs: Tuple[MatrixConfig, ...] = ()
    name: str = "an adapter with WebGPU's default limits"
    # (min, max) subgroup size the adapter reports; (0, 0) when it does not say
    subgroup_sizes: Tuple[int, int] = (0, 0)

    def limit(self, name: str) -> int:
        """A limit by its kebab-case name (WebGPU's default where the adapter did not say)."""
        return int(self.limits.get(name, WEBGPU_LIMITS[name]))

    def matrix(self, component: str, result: str) -> Optional[MatrixConfig]:
        """The first subgroup matrix configuration of `component` x `component` -> `result`."""
        if MATRIX_FEATURE not in self.features:
            return None
        return next((c for c in self.matrix_configs if (c.component, c.result) == (component, result)), None)

    def subgroup_size(self) -> int:
        """The subgroup size when the adapter reports one fixed size (min = max), else 0."""
        low, high = self.subgroup_sizes
        return high if low == high else 0

    def lacks(self, kernel: _Kernel) -> str:
        """Why this adapter cannot run `kernel` whatever the sizes, or "" when it can."""
        missing = [f for f in kernel.requires if f not in self.features]
        if missing:
            return f"{kernel.id} needs adapter features {missing}, which {self.name} lacks"
        if kernel.matrix is not None and self.matrix(*kernel.matrix) is None:
            component, result = kernel.matrix
            return (
                f"{kernel.id} needs {MATRIX_FEATURE} with an {component} x {component} -> {result} configuration, "
                f"which {self.name} lacks"
            )
        if kernel.matrix is not None and not self.subgroup_size():
            low, high = self.subgroup_sizes
            said = f"reports subgroup sizes {low}..{high}" if high else "does not report its subgroup size"
            return f"{kernel.id} lays its work out by one fixed subgroup size; {self.name} {said}"
        if not kernel.path.exists():
            return f"{kernel.id}: its shader {kernel.path.name} is not in this build"
        return ""

    def why_not(self, plan: "Plan") -> str:
        """Why this adapter cannot run `plan` (its features, sizes and grid), or "" when it can."""
        if plan.unavailable and not plan.dispatches:  # built for a kernel its target cannot run
            return plan.unavailable
        for d in plan.dispatches:
            missing = [f for f in d.requires if f not in self.features]
            if missing:
                return f"{d.label} needs adapter features {missing}, which {self.name} lacks"
            most = self.limit("max-compute-workgroups-per-dimension")
            if any(n > most for n in d.workgroups):
                return f"{d.label}: workgroups {d.workgroups} exceed {most} per dimension"
            most = self.limit("max-compute-workgroup-storage-size")
            if d.workgroup_storage > most:
                return f"{d.label} needs {d.workgroup_storage} bytes of workgroup storage; {self.name} has {most}"
            most = self.limit("max-compute-invocations-per-workgroup")
            if d.invocations > most:
                return f"{d.label} needs {d.invocations} invocations per workgroup; {self.name} allows {most}"
            most = self.limit("max-storage-buffers-per-shader-stage")
            storage = sum(t != "uniform" for _, t in d.layout)
            if storage > most:
                return f"{d.label} binds {storage} storage buffers; {self.name} allows {most}"
        biggest = self.limit("max-buffer-size")
        for b in plan.buffers:
            binding = self.limit("max-uniform-buffer-binding-size" if b.usage == "uniform" else "max-storage-buffer-binding-size")
            most = min(binding, biggest)
            if b.size > most:
                return (
                    f"buffer {b.name!r} needs {b.size} bytes; {self.name} binds at most {most} bytes per {b.usage} "
                    "buffer: use smaller inputs"
                )
        return ""

    def to_json(self) -> TargetJson:
        return {
            "name": self.name,
            "words": [],
            "features": sorted(self.features),
            "limits": dict(self.limits),
            "software": self.software,
            "subgroup_matrix_configs": [
                {"componentType": c.component, "resultComponentType": c.result, "M": c.m, "N": c.n, "K": c.k}
                for c in self.matrix_configs
            ],
            "subgroup_min_size": self.subgroup_sizes[0],
            "subgroup_max_size": self.subgroup_sizes[1],
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "Target":
        """A target from what static/webgpu.js reports of the browser's device (TargetJson); a
        software adapter is known by `software`, or else by its `words` (SwiftShader, llvmpipe);
        ValueError saying what is wrong."""
        if not isinstance(obj, Mapping):
            raise ValueError(f"a target is an object {{features, limits, software}}, got {type(obj).__name__}")
        features = obj.get("features") or []
        if not isinstance(features, list) or not all(isinstance(f, str) for f in features):
            raise ValueError(f"features must be a list of adapter feature names, got {features!r}")
        raw = obj.get("limits") or {}
        if not isinstance(raw, Mapping):
            raise ValueError(f"limits must be an object of kebab-case limit names, got {raw!r}")
        limits = dict(WEBGPU_LIMITS)
        for name, value in raw.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"limit {name!r} must be a number >= 0, got {value!r}")
            limits[str(name)] = int(value)
        configs = obj.get("subgroup_matrix_configs") or []
        if not isinstance(configs, list):
            raise ValueError(f"subgroup_matrix_configs must be a list, got {configs!r}")
        words = obj.get("words") or []
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            raise ValueError(f"words must be a list of the adapter's names, got {words!r}")
        software = obj.get("software")
        sizes = (obj.get("subgroup_min_size") or 0, obj.get("subgroup_max_size") or 0)
        if not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= 1024 for n in sizes) or sizes[0] > sizes[1]:
            raise ValueError(f"subgroup_min_size and subgroup_max_size must be integers 0 <= min <= max <= 1024, got {sizes!r}")
        return cls(
            features=frozenset(features),
            limits=limits,
            software=bool(software) if software is not None else any(_SOFTWARE.search(w) for w in words),
            matrix_configs=tuple(MatrixConfig.from_json(c) for c in configs),
            name=str(obj.get("name") or "this browser's adapter"),
            subgroup_sizes=(int(sizes[0]), int(sizes[1])),
        )


DEFAULT = Target()
