"""Build of lakeline's one C extension (everything else is in pyproject.toml).

``lakeline.indexes._native`` holds the inner loops of index entries (text hashes, HLL
registers, bloom bits). It is optional: without a C compiler the install still
succeeds and lakeline computes the same entries with numpy, only slower.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "lakeline.indexes._native",
            sources=["indexes/_native.c"],
            extra_compile_args=["-O3"],
            optional=True,
        ),
    ],
)
