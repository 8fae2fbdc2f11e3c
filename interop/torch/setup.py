"""Builds the mok_torch package: its Python modules and the extension mok_torch._C.

The extension is one C++ file (csrc/torch_module.cpp) compiled with torch's own extension
tooling (torch.utils.cpp_extension: torch's include paths, flags and ABI). Everything it calls
in the core is in libmok_torch_bridge.so, which CMake builds from csrc/ against the core's
libraries (target mok_torch_bridge); _C finds it beside itself ($ORIGIN rpath).

CMake runs this (interop/torch/CMakeLists.txt, target mok_torch; interop/torch/build.sh):

    MOK_TORCH_BRIDGE_DIR=BUILD/interop/torch/python/mok_torch \
      /usr/bin/python3 interop/torch/setup.py build \
        --build-base BUILD/interop/torch/setup --build-lib BUILD/interop/torch/python
"""
import os
import sys

from setuptools import setup
import torch
from torch.utils.cpp_extension import BuildExtension, CppExtension

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

extension = CppExtension(
    "mok_torch._C",
    ["csrc/torch_module.cpp"],
    include_dirs=[REPO],
    library_dirs=[bridge_dir],
    libraries=["mok_torch_bridge"],
    depends=["csrc/core_bridge.h", os.path.join(bridge_dir, "libmok_torch_bridge.so")],
    extra_compile_args=["-std=c++17", "-O2", "-Wno-deprecated-declarations"],  # torch's headers in C++17
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
