"""Install llama.cpp's own `llama-server` into an environment, building it from source once.

    python scripts/build_llama_server.py [--bindir DIR] [--jobs N] [--force]

The sources are the llama.cpp tree vendored in the `llama-cpp-python` sdist on PyPI (the one
registry every evekit machine reaches; llama.cpp and llama-cpp-python are both MIT-licensed).
Only the `llama-server` target is built, statically linked (no shared-library links to set up),
without the web UI (whose assets would be downloaded) and without curl/OpenSSL (evekit only
serves a local file). The binary is cached per user, keyed by the version and the CPU's
instruction-set flags (the build is `-march=native`), so a fresh clone or a new venv on the
same machine installs it in seconds: `$EVEKIT_LLAMA_CACHE`, else
`${XDG_CACHE_HOME:-~/.cache}/evekit/llama-server/` (with the build's `build.log` and
`compile_commands.json`); `EVEKIT_LLAMA_CACHE` pointed at an empty directory builds from scratch.

Compile time: the kernels (ggml, libllama) are compiled exactly as upstream's Release build
does them (-O3; ggml-cpu also -march=native); the glue around them (common/, tools/server,
tools/mtmd) is compiled as unity builds with the same flags (see UNITY_TARGETS). Measured on this
repository's 2-core machine, nothing cached, `/usr/bin/time` user+sys of the whole script: 8 min 43 s
(7 min 15 s wall), of which the sdist download takes about 5 s and its extraction 2 s; file by file
it was 12 min 55 s, and pip building the llama-cpp-python wheel that this replaces took 10 min 40 s.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
from pathlib import Path

# The llama.cpp sources come from this sdist; changing it changes the cache key.
LLAMA_CPP_PYTHON_VERSION = "0.3.36"
BINARY = "llama-server"

CMAKE_OPTIONS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",       # one self-contained binary: no libllama/libggml links to create
    "-DGGML_NATIVE=ON",              # built where it runs: the cache key includes the CPU flags
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_BUILD_TOOLS=ON",        # tools/server lives under tools/; only its target is built
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_UI=OFF",          # the web UI needs npm ...
    "-DLLAMA_USE_PREBUILT_UI=OFF",   # ... or a download; the API does not need it
    "-DLLAMA_OPENSSL=OFF",           # no HTTPS model downloads: evekit serves a local GGUF
    "-DLLAMA_CURL=OFF",
    "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",  # kept next to build.log: how the cached binary was compiled
]

# The glue around the kernels (common/, tools/server, tools/mtmd) is most of the compile time:
# ~50 files that each parse the same big headers and instantiate and optimise the same templates.
# They are compiled as CMake unity builds, up to UNITY_BATCH sources per translation unit, with
# unchanged flags (-O3 -DNDEBUG, the same for every object as upstream's Release build). ggml is
# left as upstream builds it, and libllama (src/) is a unity build upstream already. The values are
# sources that do not compile inside a batch (checked for this LLAMA_CPP_PYTHON_VERSION): they are
# compiled on their own.
UNITY_TARGETS = {
    "llama-common": ["common/json.cpp"],            # its own `ordered_json`, unlike the rest of common/
    "mtmd": ["tools/mtmd/mtmd-helper.cpp",          # `#error` when mtmd's internal headers are in
             "tools/mtmd/mtmd-helper-gen.cpp"],     # the same translation unit
    "server-context": [],
    "llama-server-impl": [],
}
UNITY_BATCH = 16


def cpu_key() -> str:
    """Machine and instruction-set flags: a `-march=native` binary runs only where they match."""
    flags = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                flags = " ".join(sorted(line.split(":", 1)[1].split()))
                break
    digest = hashlib.sha256(f"{platform.machine()}|{flags}".encode()).hexdigest()[:12]
    return f"{platform.machine()}-{digest}"


def cache_dir() -> Path:
    root = os.environ.get("EVEKIT_LLAMA_CACHE")
    if root:
        base = Path(root)
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "evekit" / "llama-server"
    return base / f"{LLAMA_CPP_PYTHON_VERSION}-{cpu_key()}"


def unity_cmake() -> str:
    """The CMake code, included at the end of llama.cpp's top-level CMakeLists.txt, that turns on
    the unity builds of UNITY_TARGETS (CMake >= 3.18; an older one builds file by file)."""
    lines = ["# Written by evekit's scripts/build_llama_server.py: unity builds for the glue targets.",
             "if(CMAKE_VERSION VERSION_LESS 3.18)  # set_source_files_properties(TARGET_DIRECTORY)",
             "    return()",
             "endif()"]
    for target, alone in UNITY_TARGETS.items():
        lines.append(f"set_target_properties({target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE {UNITY_BATCH})")
        if alone:
            files = " ".join(f'"${{CMAKE_CURRENT_LIST_DIR}}/{f}"' for f in alone)
            lines.append(f"set_source_files_properties({files} TARGET_DIRECTORY {target} "
                         "PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)")
    return "\n".join(lines) + "\n"


def prepare(source: Path) -> None:
    """Add the unity-build settings to the extracted llama.cpp tree."""
    (source / "evekit-unity.cmake").write_text(unity_cmake())
    with open(source / "CMakeLists.txt", "a") as top:
        top.write('\ninclude("${CMAKE_CURRENT_LIST_DIR}/evekit-unity.cmake")\n')


def works(binary: Path) -> bool:
    try:
        done = subprocess.run([str(binary), "--version"], capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def build(dest: Path, jobs: int) -> None:
    """Download the sdist, build the `llama-server` target only, and place the binary at `dest`."""
    for tool in ("cmake", "c++"):
        if shutil.which(tool) is None:
            sys.exit(f"build_llama_server: `{tool}` is not on PATH; install CMake and a C++ compiler")
    with tempfile.TemporaryDirectory(prefix="evekit-llama-build-") as tmp:
        work = Path(tmp)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-binary", ":all:", "--no-deps",
                        f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}", "-d", str(work)], check=True)
        (sdist,) = work.glob("llama_cpp_python-*.tar.gz")
        prefix = f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}/vendor/llama.cpp/"
        with tarfile.open(sdist) as archive:
            # The tree's `.git` file points at the sdist's absent submodule store: leave it out,
            # or cmake's version probe prints "fatal: not a git repository".
            members = [m for m in archive.getmembers()
                       if m.name.startswith(prefix) and m.name != prefix + ".git"]
            extract = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            archive.extractall(work, members=members, **extract)
        source = work / prefix
        # No web UI assets (not built with npm, not downloaded): CMake warns "UI: no assets available"
        # and the server has the API only. A placeholder tools/ui/dist/index.html would fail the
        # build: llama.cpp checks that a dist/ tree holds the whole UI (bundle, manifest, sw.js, ...).
        prepare(source)
        build_dir = work / "build"
        log = dest.parent / "build.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        # Compiler chatter goes to a log, not the terminal; a failure shows its tail.
        with open(log, "w") as out:
            for step in (["cmake", "-S", str(source), "-B", str(build_dir), *CMAKE_OPTIONS],
                         ["cmake", "--build", str(build_dir), "--target", BINARY, "-j", str(jobs)]):
                out.write(f"$ {' '.join(step)}\n")
                out.flush()
                if subprocess.run(step, stdout=out, stderr=subprocess.STDOUT).returncode != 0:
                    tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
                    sys.exit(f"{tail}\nbuild_llama_server: `{step[0]} {step[1]}` failed; full log: {log}")
        built = build_dir / "bin" / BINARY
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(build_dir / "compile_commands.json", dest.parent / "compile_commands.json")
        partial = dest.with_name(dest.name + ".partial")
        shutil.copy2(built, partial)
        os.replace(partial, dest)  # atomic: a half-written binary is never taken for a cached one


def install(bindir: Path, jobs: int, force: bool = False) -> Path:
    cached = cache_dir() / BINARY
    if force or not works(cached):
        print(f"building llama.cpp's llama-server {LLAMA_CPP_PYTHON_VERSION} from source (first time only: "
              f"several minutes on two cores, no output meanwhile; cached in {cached.parent})", flush=True)
        started = time.monotonic()
        build(cached, jobs)
        print(f"built llama-server in {time.monotonic() - started:.0f} s", flush=True)
    target = bindir / BINARY
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    shutil.copy2(cached, partial)
    os.replace(partial, target)
    if not works(target):
        sys.exit(f"build_llama_server: {target} does not run (`{target} --version` failed)")
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bindir", default=sysconfig.get_path("scripts"),
                        help="where to put the binary (default: this Python environment's bin/, where evekit looks)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel compile jobs")
    parser.add_argument("--force", action="store_true", help="rebuild even when a cached binary exists")
    args = parser.parse_args()
    print(f"llama-server: {install(Path(args.bindir), args.jobs, args.force)}")


if __name__ == "__main__":
    main()
