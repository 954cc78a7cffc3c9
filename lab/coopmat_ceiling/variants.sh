#!/usr/bin/env bash
# NVIDIA's sample's f16 x f16 -> f32 shader (shmem.comp) rebuilt as it ships and in variants that
# each add one thing Tint's SPIR-V does and the sample's does not (README.md: the differences).
# Each variant is DIR/<name>/shaders/shmemfp16_fp32.spv: the runner reads shaders/ from its working
# directory. Needs glslangValidator (GL_KHR_cooperative_matrix: glslang >= 14), spirv-as, spirv-dis
# and spirv-val (spirv-tools), run here through inroot.sh (the test bed's Debian trixie root).
#   bash lab/coopmat_ceiling/variants.sh DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(realpath -m "${1:?usage: variants.sh DIR}")
mkdir -p "$out"  # realpath --relative-to needs it to exist
cd "$here"
rel=$(realpath --relative-to="$here" "$out")
tool() { bash "$here/inroot.sh" "$@"; }
build() {  # name, defines...
  local name=$1; shift
  mkdir -p "$out/$name/shaders"
  tool glslangValidator --target-env spirv1.3 -DA_BITS=16 -DA_TYPE=float16_t -DC_TYPE=float32_t "$@" \
    -V glsl/shmem_tint.comp -o "$rel/$name/shaders/shmemfp16_fp32.spv" | grep -v -e '^glsl/' -e WARNING -e '^$' || true
}
# SPIR-V edits of a variant: sed on its disassembly, reassembled and validated.
edit() {  # from, name, sed script
  local from=$1 name=$2 script=$3
  mkdir -p "$out/$name/shaders"
  tool spirv-dis "$rel/$from/shaders/shmemfp16_fp32.spv" -o "$rel/$name/shaders/s.spvasm"
  sed -i -e "$script" "$out/$name/shaders/s.spvasm"
  tool spirv-as --target-env spv1.3 "$rel/$name/shaders/s.spvasm" -o "$rel/$name/shaders/shmemfp16_fp32.spv"
  rm "$out/$name/shaders/s.spvasm"
}
build sample
build no_unroll -DNO_UNROLL
build zero_init -DZERO_INIT
build clamp -DCLAMP
build loop_guard -DLOOP_GUARD
# Tint's barrier semantics: AcquireRelease|WorkgroupMemory|MakeAvailable|MakeVisible (0x6108)
edit sample barrier_av 's/\(OpControlBarrier %[a-z0-9_]* %[a-z0-9_]*\) %uint_264/\1 %uint_24840/; s/^\( *\)%uint_264 = OpConstant %uint 264/&\n\1%uint_24840 = OpConstant %uint 24840/'
# Tint's matrix loads from workgroup memory: NonPrivatePointer alone (no MakePointerVisible)
edit sample load_ops 's/MakePointerVisible|NonPrivatePointer %uint_2/NonPrivatePointer/'
# Dawn's maximal reconvergence (VK_KHR_shader_maximal_reconvergence, when the device has it)
edit sample reconverge 's/^\( *\)OpExtension "SPV_KHR_vulkan_memory_model"/&\n\1OpExtension "SPV_KHR_maximal_reconvergence"/; s/^\( *\)OpExecutionMode \(%[a-z0-9_]*\) LocalSize.*/&\n\1OpExecutionMode \2 MaximallyReconvergesKHR/'
build tint_all -DNO_UNROLL -DZERO_INIT -DCLAMP -DLOOP_GUARD
edit tint_all tint_all_ops 's/MakePointerVisible|NonPrivatePointer %uint_2/NonPrivatePointer/; s/^\( *\)OpExtension "SPV_KHR_vulkan_memory_model"/&\n\1OpExtension "SPV_KHR_maximal_reconvergence"/; s/^\( *\)OpExecutionMode \(%[a-z0-9_]*\) LocalSize.*/&\n\1OpExecutionMode \2 MaximallyReconvergesKHR/'
for d in "$out"/*; do
  tool spirv-val --target-env vulkan1.3 "$(realpath --relative-to="$here" "$d")/shaders/shmemfp16_fp32.spv"
done
ls "$out"
