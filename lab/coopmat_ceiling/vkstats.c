// vkstats: what the Vulkan driver's compiler made of a compute SPIR-V module, through
// VK_KHR_pipeline_executable_properties (registers, local memory and what else the driver
// reports). Its descriptor layout is read from the module itself (every DescriptorSet/Binding
// decoration: a Uniform variable is a uniform buffer, anything else a storage buffer; a
// PushConstant block gets 128 bytes), every feature the device has is enabled, and the pipeline
// asks for full subgroups, as Dawn's does for subgroup matrices.
// With VKSTATS_IR=DIR, the driver's internal representations of each executable (where it gives
// any: shader assembly) go to DIR/<module>.<executable>.<n>.txt (or .bin). With VKSTATS_CACHE=DIR,
// each pipeline is made through a pipeline cache of its own, written to DIR/<module>.cache (the
// driver's compiled code is inside, in the driver's format).
//   vkstats FILE.spv [FILE.spv ...]     (VKSTATS_DEVICE=N picks the N-th physical device)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vulkan.h>

#define CHECK(x) do { VkResult r_ = (x); if (r_ != VK_SUCCESS) { fprintf(stderr, "%s: %d\n", #x, r_); exit(1); } } while (0)

static uint32_t *read_spv(const char *path, size_t *words) {
  FILE *f = fopen(path, "rb");
  if (!f) { perror(path); exit(1); }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint32_t *w = malloc(n);
  if (fread(w, 1, n, f) != (size_t)n) { perror(path); exit(1); }
  fclose(f);
  *words = n / 4;
  return w;
}

#define MAXID 200000
#define MAXB 64
typedef struct { uint32_t set, binding; VkDescriptorType type; } Binding;

// Bindings from the module: OpDecorate id DescriptorSet/Binding, OpVariable storage classes.
static int reflect(const uint32_t *w, size_t n, Binding *out, int *push) {
  static int32_t set[MAXID], bind[MAXID];
  memset(set, -1, sizeof set);
  memset(bind, -1, sizeof bind);
  int count = 0;
  *push = 0;
  for (size_t i = 5; i < n;) {
    uint32_t op = w[i] & 0xffff, len = w[i] >> 16;
    if (len == 0) break;
    if (op == 71 && len >= 4 && w[i + 1] < MAXID) {  // OpDecorate
      if (w[i + 2] == 34) set[w[i + 1]] = w[i + 3];
      if (w[i + 2] == 33) bind[w[i + 1]] = w[i + 3];
    }
    if (op == 59 && len >= 4) {  // OpVariable type id storage
      uint32_t id = w[i + 2], sc = w[i + 3];
      if (sc == 9) *push = 1;
      if (id < MAXID && set[id] >= 0 && bind[id] >= 0 && count < MAXB) {
        out[count].set = set[id];
        out[count].binding = bind[id];
        out[count].type = sc == 2 ? VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        count++;
      }
    }
    i += len;
  }
  return count;
}

int main(int argc, char **argv) {
  VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.apiVersion = VK_API_VERSION_1_3;
  VkInstanceCreateInfo ici = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ici.pApplicationInfo = &app;
  VkInstance inst;
  CHECK(vkCreateInstance(&ici, NULL, &inst));
  uint32_t ndev = 0;
  CHECK(vkEnumeratePhysicalDevices(inst, &ndev, NULL));
  VkPhysicalDevice devs[8];
  if (ndev > 8) ndev = 8;
  CHECK(vkEnumeratePhysicalDevices(inst, &ndev, devs));
  uint32_t pick = getenv("VKSTATS_DEVICE") ? atoi(getenv("VKSTATS_DEVICE")) : 0;
  if (pick >= ndev) { fprintf(stderr, "no device %u of %u\n", pick, ndev); return 1; }
  VkPhysicalDevice pd = devs[pick];
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(pd, &props);
  printf("device: %s (driver %u)\n", props.deviceName, props.driverVersion);

  // Every feature the device has, enabled: the chain queried is the chain passed on.
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR pexec = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
  VkPhysicalDeviceCooperativeMatrixFeaturesKHR coop = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR, &pexec};
  VkPhysicalDeviceVulkan13Features f13 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES, &coop};
  VkPhysicalDeviceVulkan12Features f12 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, &f13};
  VkPhysicalDeviceVulkan11Features f11 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, &f12};
  VkPhysicalDeviceFeatures2 f2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &f11};
  vkGetPhysicalDeviceFeatures2(pd, &f2);
  int stats = pexec.pipelineExecutableInfo;  // without it (lavapipe): pipelines made, nothing reported
  if (!stats) printf("no pipelineExecutableInfo on this device: pipelines only\n");
  f2.features.robustBufferAccess = VK_TRUE;  // Dawn's; the driver may compile bounds checks for it

  uint32_t next = 0;
  CHECK(vkEnumerateDeviceExtensionProperties(pd, NULL, &next, NULL));
  VkExtensionProperties *exts = malloc(sizeof *exts * next);
  CHECK(vkEnumerateDeviceExtensionProperties(pd, NULL, &next, exts));
  const char *want[] = {"VK_KHR_pipeline_executable_properties", "VK_KHR_cooperative_matrix",
                        "VK_KHR_shader_maximal_reconvergence", "VK_KHR_shader_subgroup_uniform_control_flow",
                        "VK_KHR_shader_float16_int8", "VK_KHR_16bit_storage", "VK_KHR_vulkan_memory_model"};
  const char *on[16];
  uint32_t non = 0;
  for (size_t k = 0; k < sizeof want / sizeof *want; k++)
    for (uint32_t e = 0; e < next; e++)
      if (!strcmp(exts[e].extensionName, want[k])) on[non++] = want[k];
  VkPhysicalDeviceShaderMaximalReconvergenceFeaturesKHR recon = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_MAXIMAL_RECONVERGENCE_FEATURES_KHR};
  VkPhysicalDeviceShaderSubgroupUniformControlFlowFeaturesKHR sucf = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SUBGROUP_UNIFORM_CONTROL_FLOW_FEATURES_KHR};
  for (uint32_t k = 0; k < non; k++) {
    if (!strcmp(on[k], "VK_KHR_shader_maximal_reconvergence")) { recon.pNext = pexec.pNext; pexec.pNext = &recon; }
    if (!strcmp(on[k], "VK_KHR_shader_subgroup_uniform_control_flow")) { sucf.pNext = pexec.pNext; pexec.pNext = &sucf; }
  }
  vkGetPhysicalDeviceFeatures2(pd, &f2);
  f2.features.robustBufferAccess = VK_TRUE;

  float prio = 1.0f;
  VkDeviceQueueCreateInfo qci = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueCount = 1;
  qci.pQueuePriorities = &prio;
  VkDeviceCreateInfo dci = {VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, &f2};
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  dci.enabledExtensionCount = non;
  dci.ppEnabledExtensionNames = on;
  VkDevice dev;
  CHECK(vkCreateDevice(pd, &dci, NULL, &dev));
  PFN_vkGetPipelineExecutablePropertiesKHR getProps = (PFN_vkGetPipelineExecutablePropertiesKHR)vkGetDeviceProcAddr(dev, "vkGetPipelineExecutablePropertiesKHR");
  PFN_vkGetPipelineExecutableStatisticsKHR getStats = (PFN_vkGetPipelineExecutableStatisticsKHR)vkGetDeviceProcAddr(dev, "vkGetPipelineExecutableStatisticsKHR");

  for (int a = 1; a < argc; a++) {
    size_t n;
    uint32_t *w = read_spv(argv[a], &n);
    Binding b[MAXB];
    int push;
    int nb = reflect(w, n, b, &push);
    uint32_t maxset = 0;
    for (int k = 0; k < nb; k++) if (b[k].set + 1 > maxset) maxset = b[k].set + 1;
    VkDescriptorSetLayout layouts[8];
    for (uint32_t s = 0; s < maxset && s < 8; s++) {
      VkDescriptorSetLayoutBinding lb[MAXB];
      uint32_t cnt = 0;
      for (int k = 0; k < nb; k++) {
        if (b[k].set != s) continue;
        memset(&lb[cnt], 0, sizeof lb[cnt]);
        lb[cnt].binding = b[k].binding;
        lb[cnt].descriptorType = b[k].type;
        lb[cnt].descriptorCount = 1;
        lb[cnt].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
        cnt++;
      }
      VkDescriptorSetLayoutCreateInfo lci = {VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
      lci.bindingCount = cnt;
      lci.pBindings = lb;
      CHECK(vkCreateDescriptorSetLayout(dev, &lci, NULL, &layouts[s]));
    }
    VkPushConstantRange pr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, 128};
    VkPipelineLayoutCreateInfo plci = {VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    plci.setLayoutCount = maxset;
    plci.pSetLayouts = layouts;
    plci.pushConstantRangeCount = push ? 1 : 0;
    plci.pPushConstantRanges = &pr;
    VkPipelineLayout pl;
    CHECK(vkCreatePipelineLayout(dev, &plci, NULL, &pl));
    VkShaderModuleCreateInfo smci = {VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    smci.codeSize = n * 4;
    smci.pCode = w;
    VkShaderModule sm;
    CHECK(vkCreateShaderModule(dev, &smci, NULL, &sm));
    // The entry point: the first OpEntryPoint's name.
    const char *entry = "main";
    for (size_t i = 5; i < n;) {
      uint32_t op = w[i] & 0xffff, len = w[i] >> 16;
      if (op == 15) { entry = (const char *)&w[i + 3]; break; }
      i += len ? len : 1;
    }
    VkComputePipelineCreateInfo cpci = {VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    const char *irdir = getenv("VKSTATS_IR");
    cpci.flags = stats ? VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR : 0;
    if (stats && irdir) cpci.flags |= VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR;
    cpci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    cpci.stage.flags = f13.computeFullSubgroups ? VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT : 0;
    cpci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    cpci.stage.module = sm;
    cpci.stage.pName = entry;
    cpci.layout = pl;
    VkPipeline pipe;
    const char *cachedir = getenv("VKSTATS_CACHE");
    VkPipelineCache cache = VK_NULL_HANDLE;
    if (cachedir) {
      VkPipelineCacheCreateInfo pcci = {VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
      CHECK(vkCreatePipelineCache(dev, &pcci, NULL, &cache));
    }
    VkResult r = vkCreateComputePipelines(dev, cache, 1, &cpci, NULL, &pipe);
    if (cachedir && r == VK_SUCCESS) {
      size_t size = 0;
      CHECK(vkGetPipelineCacheData(dev, cache, &size, NULL));
      void *data = malloc(size);
      CHECK(vkGetPipelineCacheData(dev, cache, &size, data));
      const char *base = strrchr(argv[a], '/') ? strrchr(argv[a], '/') + 1 : argv[a];
      char path[1024];
      snprintf(path, sizeof path, "%s/%s.cache", cachedir, base);
      FILE *f = fopen(path, "wb");
      if (f) { fwrite(data, 1, size, f); fclose(f); }
      printf("pipeline cache: %zu bytes -> %s\n", size, path);
      free(data);
    }
    printf("== %s (entry %s, %d bindings%s): pipeline %d\n", argv[a], entry, nb, push ? ", push constants" : "", r);
    if (r != VK_SUCCESS || !stats) continue;
    VkPipelineInfoKHR pinfo = {VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR};
    pinfo.pipeline = pipe;
    uint32_t ne = 0;
    CHECK(getProps(dev, &pinfo, &ne, NULL));
    VkPipelineExecutablePropertiesKHR ep[8];
    for (uint32_t e = 0; e < 8; e++) { memset(&ep[e], 0, sizeof ep[e]); ep[e].sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR; }
    if (ne > 8) ne = 8;
    CHECK(getProps(dev, &pinfo, &ne, ep));
    for (uint32_t e = 0; e < ne; e++) {
      printf("executable %u: %s (%s), subgroup size %u\n", e, ep[e].name, ep[e].description, ep[e].subgroupSize);
      VkPipelineExecutableInfoKHR einfo = {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR};
      einfo.pipeline = pipe;
      einfo.executableIndex = e;
      uint32_t ns = 0;
      CHECK(getStats(dev, &einfo, &ns, NULL));
      VkPipelineExecutableStatisticKHR *st = calloc(ns, sizeof *st);
      for (uint32_t s = 0; s < ns; s++) st[s].sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR;
      CHECK(getStats(dev, &einfo, &ns, st));
      for (uint32_t s = 0; s < ns; s++) {
        printf("  %s: ", st[s].name);
        switch (st[s].format) {
          case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: printf("%u", st[s].value.b32); break;
          case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: printf("%lld", (long long)st[s].value.i64); break;
          case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: printf("%llu", (unsigned long long)st[s].value.u64); break;
          default: printf("%g", st[s].value.f64);
        }
        printf("  (%s)\n", st[s].description);
      }
      free(st);
      if (!irdir) continue;
      PFN_vkGetPipelineExecutableInternalRepresentationsKHR getIR = (PFN_vkGetPipelineExecutableInternalRepresentationsKHR)vkGetDeviceProcAddr(dev, "vkGetPipelineExecutableInternalRepresentationsKHR");
      uint32_t nir = 0;
      CHECK(getIR(dev, &einfo, &nir, NULL));
      VkPipelineExecutableInternalRepresentationKHR *ir = calloc(nir, sizeof *ir);
      for (uint32_t s = 0; s < nir; s++) ir[s].sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION_KHR;
      CHECK(getIR(dev, &einfo, &nir, ir));  // sizes
      for (uint32_t s = 0; s < nir; s++) ir[s].pData = malloc(ir[s].dataSize + 1);
      VkResult rr = getIR(dev, &einfo, &nir, ir);
      const char *base = strrchr(argv[a], '/') ? strrchr(argv[a], '/') + 1 : argv[a];
      for (uint32_t s = 0; s < nir; s++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s.%u.%u.%s", irdir, base, e, s, ir[s].isText ? "txt" : "bin");
        FILE *f = fopen(path, "wb");
        if (f) { fwrite(ir[s].pData, 1, ir[s].dataSize, f); fclose(f); }
        printf("  representation %u: %s (%s), %zu bytes%s -> %s (%d)\n", s, ir[s].name, ir[s].description,
               ir[s].dataSize, ir[s].isText ? ", text" : "", path, rr);
      }
    }
    vkDestroyPipeline(dev, pipe, NULL);
  }
  return 0;
}
