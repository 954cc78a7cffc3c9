// What a kernel on Chromium's subgroup matrices declares first (#included at the top of its
// module, before any declaration): f16, subgroups and the matrices. Offsets derived from the
// subgroup's index are subgroup-uniform, not workgroup-uniform: the uniformity diagnostics are off.
enable f16;
enable subgroups;
enable chromium_experimental_subgroup_matrix;
diagnostic(off, chromium.subgroup_matrix_uniformity);
diagnostic(off, subgroup_uniformity);
