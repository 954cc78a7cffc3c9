"""An adapter that lists subgroup-matrix configurations (Chromium on an NVIDIA GPU with
`allow_unsafe_apis`): WebGPU hands them out as GPUSubgroupMatrixConfig objects whose fields are
getters on the prototype, so serialising the objects themselves gives `{}` and the page's Python
refused the adapter (found on the H100). SwiftShader lists none, so the adapter's info is given
such objects here before the page asks for it."""

from pagetools import wait_for_status

CONFIGS_LIKE_CHROMIUM = """
(() => {
  class Config {  // fields as getters on the prototype, as Chromium's GPUSubgroupMatrixConfig has them
    constructor(m, n, k) { this._mnk = [m, n, k]; Object.defineProperty(this, "_mnk", { enumerable: false }); }
    get componentType() { return "f16"; }
    get resultComponentType() { return "f32"; }
    get M() { return this._mnk[0]; }
    get N() { return this._mnk[1]; }
    get K() { return this._mnk[2]; }
  }
  const real = Object.getOwnPropertyDescriptor(GPUAdapter.prototype, "info");
  Object.defineProperty(GPUAdapter.prototype, "info", {
    configurable: true,
    get() {
      const i = real.get.call(this);
      const out = {};
      for (const k of ["vendor", "architecture", "device", "description", "subgroupMinSize", "subgroupMaxSize"]) out[k] = i[k];
      out.subgroupMatrixConfigs = [new Config(16, 16, 16), new Config(16, 8, 16)];
      return out;
    },
  });
})();
"""


def test_page_reads_matrix_configurations_given_as_getters(page, server):
    page.add_init_script(CONFIGS_LIKE_CHROMIUM)
    page.goto(server + "/?kernel=flash_fwd.tiled&heads=1&seq_q=8&seq_k=8&head_dim=4")
    status = wait_for_status(page)
    assert status == "done", page.locator("body").inner_text()[:2000]
