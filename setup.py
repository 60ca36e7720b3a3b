"""Build of lakeline's two C extensions (everything else is in pyproject.toml).

``lakeline.indexes._native`` holds the inner loops of index entries (text hashes, HLL
registers, bloom bits); ``lakeline.table._position_filter`` drops the rows a
merge-on-read read's position logs touch. Both are optional: without a C compiler the
install still succeeds and lakeline computes the same results with numpy and Arrow,
only slower.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("lakeline.indexes._native", sources=["indexes/_native.c"], extra_compile_args=["-O3"], optional=True),
        Extension(
            "lakeline.table._position_filter",
            sources=["table/_position_filter.c"],
            extra_compile_args=["-O3"],
            optional=True,
        ),
    ]
)
