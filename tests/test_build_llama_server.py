"""scripts/build_llama_server.py: a cached binary installs without a build; a missing or broken one is rebuilt."""
from __future__ import annotations

import importlib.util
import subprocess

import pytest

from evekit.paths import REPO_ROOT


@pytest.fixture()
def script(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("build_llama_server", REPO_ROOT / "scripts" / "build_llama_server.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setenv("EVEKIT_LLAMA_CACHE", str(tmp_path / "cache"))
    return module


def _fake(path, version_exit: int = 0):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n[ \"$1\" = --version ] && exit {version_exit}\necho serving\n")
    path.chmod(0o755)


def test_cache_key_names_the_version_and_the_cpu(script, tmp_path):
    key = script.cache_dir()
    assert key.parent == tmp_path / "cache"
    assert key.name.startswith(f"{script.LLAMA_CPP_PYTHON_VERSION}-")
    assert script.cpu_key() in key.name  # a -march=native binary is only reused on the same kind of CPU


def test_a_cached_binary_is_installed_without_building(script, tmp_path, monkeypatch):
    _fake(script.cache_dir() / "llama-server")
    monkeypatch.setattr(script, "build", lambda *a: pytest.fail("built although a working binary was cached"))
    target = script.install(tmp_path / "bin", jobs=2)
    assert target == tmp_path / "bin" / "llama-server"
    assert subprocess.run([str(target)], capture_output=True, text=True).stdout == "serving\n"


def test_a_broken_cached_binary_is_rebuilt(script, tmp_path, monkeypatch):
    _fake(script.cache_dir() / "llama-server", version_exit=1)  # e.g. built for another CPU
    built = []

    def fake_build(dest, jobs):
        built.append((dest, jobs))
        _fake(dest)

    monkeypatch.setattr(script, "build", fake_build)
    script.install(tmp_path / "bin", jobs=3)
    assert built == [(script.cache_dir() / "llama-server", 3)]
    assert script.works(tmp_path / "bin" / "llama-server")


def test_only_the_server_is_built_statically_with_nothing_downloaded(script):
    opts = dict(o.removeprefix("-D").split("=", 1) for o in script.CMAKE_OPTIONS)
    assert opts["BUILD_SHARED_LIBS"] == "OFF"
    assert opts["LLAMA_USE_PREBUILT_UI"] == "OFF" and opts["LLAMA_BUILD_UI"] == "OFF"
    assert opts["LLAMA_BUILD_TESTS"] == "OFF" and opts["LLAMA_BUILD_EXAMPLES"] == "OFF"


def test_the_glue_is_a_unity_build_and_the_kernels_are_left_alone(script):
    cmake = script.unity_cmake()
    for target, alone in script.UNITY_TARGETS.items():
        assert f"set_target_properties({target} PROPERTIES UNITY_BUILD ON" in cmake
        for source in alone:  # the sources that do not compile inside a batch stay on their own
            assert f'"${{CMAKE_CURRENT_LIST_DIR}}/{source}"' in cmake
    assert "SKIP_UNITY_BUILD_INCLUSION ON" in cmake
    # ggml's and libllama's compilation is upstream's: no target of theirs, no compile flags touched
    assert not {"ggml", "ggml-base", "ggml-cpu", "llama"} & set(script.UNITY_TARGETS)
    assert "COMPILE_OPTIONS" not in cmake and "CMAKE_CXX_FLAGS" not in cmake and "-O" not in cmake
    assert not any("FLAGS" in o for o in script.CMAKE_OPTIONS)


def test_prepare_includes_the_unity_settings_at_the_end_of_the_top_level_cmakelists(script, tmp_path):
    (tmp_path / "CMakeLists.txt").write_text('project("llama.cpp" C CXX)\nadd_subdirectory(tools)\n')
    script.prepare(tmp_path)
    top = (tmp_path / "CMakeLists.txt").read_text()
    assert top.startswith('project("llama.cpp" C CXX)\nadd_subdirectory(tools)\n')  # after every target exists
    assert top.rstrip().endswith('include("${CMAKE_CURRENT_LIST_DIR}/evekit-unity.cmake")')
    assert (tmp_path / "evekit-unity.cmake").read_text() == script.unity_cmake()
    assert not (tmp_path / "tools" / "ui" / "dist").exists()  # a partial UI tree would fail llama.cpp's check
