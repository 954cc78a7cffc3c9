"""The SPIR-V modules Dawn dumped into a Chromium log (`dump_shaders`), assembled and handed to
vkstats: what NVIDIA's compiler made of each (registers, local memory, ...), one JSON line each.

    python3 lab/coopmat_ceiling/spirv_stats.py LABEL CHROMIUM_LOG VKSTATS_DIR OUT_DIR

Each module is named by its entry point, workgroup size and workgroup variables (their types
carry the array sizes: which tile it is).
"""

import json
import re
import subprocess
import sys
from pathlib import Path

label, log, tools, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
out.mkdir(parents=True, exist_ok=True)
text = log.read_text(errors="replace")
parts = text.split("Dumped SPIRV disassembly */")[1:]
for n, part in enumerate(parts):
    body = part.split('", source:')[0]
    lines = [ln for ln in body.splitlines() if ln.strip() and not ln.startswith("[")]
    asm = "\n".join(lines) + "\n"
    entry = re.search(r'OpEntryPoint GLCompute %\S+ "(\w+)"', asm)
    size = re.search(r"OpExecutionMode %\S+ LocalSize (\d+) (\d+) (\d+)", asm)
    wg = re.findall(r"(%\w+) = OpVariable (%\S+) Workgroup", asm)
    if not entry:
        continue
    name = f"{label}-{n:02d}-{entry.group(1)}"
    src = out / f"{name}.spvasm"
    spv = out / f"{name}.spv"
    src.write_text(asm)
    run = [
        str(tools / "ld-linux-x86-64.so.2"),
        "--library-path",
        str(tools),
        str(tools / "spirv-as"),
        "--target-env",
        "spv1.4",
        str(src),
        "-o",
        str(spv),
    ]
    r = subprocess.run(run, capture_output=True, text=True)
    rec = {
        "label": label,
        "module": n,
        "entry": entry.group(1),
        "local_size": size.groups() if size else None,
        "workgroup": [f"{a} {b}" for a, b in wg],
        "asm_lines": len(lines),
    }
    if r.returncode:
        rec["error"] = "spirv-as: " + r.stderr[-400:]
    else:
        s = subprocess.run([str(tools / "vkstats"), str(spv)], capture_output=True, text=True)
        stats = {}
        for ln in s.stdout.splitlines():
            m = re.match(r"  (.+?): (\S+)  \(", ln)
            if m:
                stats[m.group(1)] = m.group(2)
        rec["stats"] = stats
        if s.returncode or not stats:
            rec["vkstats"] = (s.stdout + s.stderr)[-600:]
    print(json.dumps(rec), flush=True)
