"""Builds the mok_torch package: its Python modules and the extension mok_torch._C.

The extension is one C++ file (csrc/torch_module.cpp) compiled with torch's own extension
tooling (torch.utils.cpp_extension: torch's include paths, flags and ABI). Everything it calls
in the core is in libmok_torch_bridge.so, which CMake builds from csrc/ against the core's
libraries (target mok_torch_bridge); _C finds it beside itself ($ORIGIN rpath).

For a torch with CUDA (torch.version.cuda set, a CUDA toolkit at CUDA_HOME) it is a
CUDAExtension with MOK_TORCH_CUDA defined: _C then hands CUDA tensors to the bridge with torch's
current stream (the kernels themselves are in the bridge; _C compiles no .cu file). Otherwise a
CppExtension for CPU tensors only. MOK_TORCH_CPU_ONLY=1 forces the latter.

CMake runs this (interop/torch/CMakeLists.txt, target mok_torch; interop/torch/build.sh):

    MOK_TORCH_BRIDGE_DIR=BUILD/interop/torch/python/mok_torch \
      /usr/bin/python3 interop/torch/setup.py build \
        --build-base BUILD/interop/torch/setup --build-lib BUILD/interop/torch/python
"""
import os
import sys

from setuptools import setup
import torch
from torch.utils import cpp_extension
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
os.chdir(HERE)  # setuptools takes package folders relative to the working directory

bridge_dir = os.environ.get("MOK_TORCH_BRIDGE_DIR")
if not bridge_dir or not os.path.exists(os.path.join(bridge_dir, "libmok_torch_bridge.so")):
    sys.exit("setup.py: set MOK_TORCH_BRIDGE_DIR to the folder of libmok_torch_bridge.so "
             "(build it with interop/torch/build.sh)")

# The bridge passes std::string and std::vector between the two libraries, so both must use the
# same C++ library ABI; the core is built with GCC's default (the C++11 ABI).
if not torch._C._GLIBCXX_USE_CXX11_ABI:
    sys.exit("setup.py: this torch uses the pre-C++11 libstdc++ ABI; the core is built with the C++11 ABI. "
             "Build the core with -D_GLIBCXX_USE_CXX11_ABI=0 or use a torch built with the C++11 ABI.")

use_cuda = (torch.version.cuda is not None and cpp_extension.CUDA_HOME is not None
            and os.environ.get("MOK_TORCH_CPU_ONLY", "0") != "1")
print(f"setup.py: torch {torch.__version__}, CUDA {torch.version.cuda}, CUDA_HOME {cpp_extension.CUDA_HOME}: "
      f"{'CUDAExtension (CPU and CUDA tensors)' if use_cuda else 'CppExtension (CPU tensors)'}", file=sys.stderr)
make_extension = CUDAExtension if use_cuda else CppExtension
# The C++ standard: torch 2's tooling adds the one its headers need (C++17 or later) when none
# is given; torch 1's would add C++14, and this file needs C++17.
cxx_flags = ["-O2", "-Wno-deprecated-declarations"]
if int(torch.__version__.split(".")[0]) < 2:
    cxx_flags.insert(0, "-std=c++17")
extension = make_extension(
    "mok_torch._C",
    ["csrc/torch_module.cpp"],
    include_dirs=[REPO],
    library_dirs=[bridge_dir],
    libraries=["mok_torch_bridge"],
    define_macros=[("MOK_TORCH_CUDA", "1")] if use_cuda else [],
    depends=["csrc/core_bridge.h", os.path.join(bridge_dir, "libmok_torch_bridge.so")],
    # a dict for CUDAExtension (per compiler; no .cu file is compiled)
    extra_compile_args={"cxx": cxx_flags, "nvcc": []} if use_cuda else cxx_flags,
    extra_link_args=["-Wl,-rpath,$ORIGIN"],
)

setup(
    name="mok_torch",
    version="0.1.0",
    description="PyTorch modules over the MoK Workbench core: KittenLinear, MoKMoE",
    packages=["mok_torch"],
    ext_modules=[extension],
    cmdclass={"build_ext": BuildExtension},
)
