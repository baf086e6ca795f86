"""The package list, which pyproject.toml cannot state: everything under tokencap/, plus the two
top-level folders the wheel carries inside the package (their mapping is in pyproject.toml)."""

from setuptools import find_namespace_packages, setup

setup(packages=find_namespace_packages(include=["tokencap*"]) + ["tokencap.sample_data",
                                                                   "tokencap.app.streamlit_config"])
