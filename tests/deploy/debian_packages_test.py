"""The Debian packages `cpack -G DEB` makes from the build tree, checked as dpkg sees them: control fields,
contents, conffiles, maintainer scripts, the systemd units verified and sysusers.d/tmpfiles.d applied in the
root the packages extract into, and libpodscope linked by a small program through pkg-config and find_package.

Environment: PODSCOPE_BUILD_DIR (a built tree, configured with this source). lintian runs where installed.
PODSCOPE_SANITIZED=1 (the instrumented build) skips it: its libraries need ASan's runtime in every program that
links them, which packages never ship.
"""
import os
import shutil
import subprocess
import tempfile
import textwrap
import unittest

BUILD = os.environ["PODSCOPE_BUILD_DIR"]
PACKAGES = ["podscope-agent", "podscope-coordinator", "libpodscope"]
if os.path.exists(os.path.join(BUILD, "lib", "libpodscope_cupti.so")):
    PACKAGES.append("podscope-cupti")  # built only where the CUDA toolkit is found

PROGRAM = textwrap.dedent("""\
    #include <podscope/podscope.h>
    #include <podscope/podscope_c.h>
    #include <cstdio>

    // Annotates a few steps with no agent to talk to: the library must neither block nor fail.
    int main() {
      podscope::init({.cores = {0}, .job = "link-check", .socket_path = "/nonexistent/agent.sock"});
      for (int64_t step = 0; step < 3; ++step) {
        podscope::Span s = podscope::step(step);
        auto in = podscope::infeed();
      }
      std::printf("connected=%d\\n", podscope_agent_connected());
      podscope::shutdown();
      return 0;
    }
    """)


def run(args, **kwargs):
    result = subprocess.run(args, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {result.returncode}:\n{result.stdout}{result.stderr}")
    return result.stdout


class DebianPackagesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.environ.get("PODSCOPE_SANITIZED") == "1":
            raise unittest.SkipTest("an instrumented build (PODSCOPE_SANITIZE) is not packaged: its libraries need "
                                    "ASan's runtime in every program that links them; run this in the plain build")
        cls.scratch = tempfile.mkdtemp(prefix="podscope-deb-")
        out = os.path.join(cls.scratch, "out")
        run(["cpack", "-G", "DEB", "--config", os.path.join(BUILD, "CPackConfig.cmake"), "-B", out])
        cls.debs = {}
        for name in os.listdir(out):
            if name.endswith(".deb"):
                path = os.path.join(out, name)
                cls.debs[run(["dpkg-deb", "-f", path, "Package"]).strip()] = path
        cls.root = os.path.join(cls.scratch, "root")
        for path in cls.debs.values():
            run(["dpkg-deb", "-x", path, cls.root])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.scratch, ignore_errors=True)

    def contents(self, package):
        # dpkg-deb -c lists "mode owner size date time ./path[ -> target]".
        return {line.split()[5].lstrip(".") for line in run(["dpkg-deb", "-c", self.debs[package]]).splitlines()}

    def control_file(self, package, name):
        directory = os.path.join(self.scratch, "control", package)
        if not os.path.isdir(directory):
            os.makedirs(os.path.dirname(directory), exist_ok=True)
            run(["dpkg-deb", "-e", self.debs[package], directory])
        path = os.path.join(directory, name)
        return path if os.path.exists(path) else None

    def test_every_component_is_one_package(self):
        self.assertEqual(sorted(self.debs), sorted(PACKAGES))

    def test_control_fields_name_the_version_and_the_shared_libraries_needed(self):
        for package, path in self.debs.items():
            info = run(["dpkg-deb", "-I", path])
            for field in ("Package: " + package, "Version: 0.1.0", "Architecture: amd64", "Maintainer: ",
                          "Description: "):
                self.assertIn(field, info, package)
        depends = {p: run(["dpkg-deb", "-f", self.debs[p], "Depends"]) for p in self.debs}
        for library in ("libgrpc++", "libprotobuf", "libyaml-cpp", "libsystemd0", "libc6"):
            self.assertIn(library, depends["podscope-agent"])
        self.assertIn("libgrpc++", depends["podscope-coordinator"])
        self.assertIn("libc6", depends["libpodscope"])
        if "podscope-cupti" in self.debs:  # CUDA's libcupti is not a Debian package: documented, not declared
            self.assertEqual(depends["podscope-cupti"].strip(), "libpodscope (= 0.1.0)")

    def test_contents_are_the_install_rules_of_each_component(self):
        expected = {
            "podscope-agent": ["/usr/bin/podscope-agent", "/etc/podscope/agent.yaml",
                               "/usr/lib/systemd/system/podscope-agent.service",
                               "/usr/lib/sysusers.d/podscope-agent.conf", "/usr/lib/tmpfiles.d/podscope-agent.conf",
                               "/usr/share/doc/podscope/agent.md"],
            "podscope-coordinator": ["/usr/bin/podscope-coordinator", "/usr/bin/podscope",
                                     "/etc/podscope/coordinator.yaml",
                                     "/usr/lib/systemd/system/podscope-coordinator.service",
                                     "/usr/share/doc/podscope-coordinator/capture.md"],
            "libpodscope": ["/usr/lib/libpodscope.so.0.1.0", "/usr/lib/libpodscope.so.0", "/usr/lib/libpodscope.so",
                            "/usr/include/podscope/podscope.h", "/usr/include/podscope/podscope_c.h",
                            "/usr/lib/pkgconfig/podscope.pc", "/usr/lib/cmake/podscope/podscopeConfig.cmake",
                            "/usr/lib/cmake/podscope/podscopeConfigVersion.cmake",
                            "/usr/lib/python3/dist-packages/podscope.py"],
            "podscope-cupti": ["/usr/lib/libpodscope_cupti.so"],
        }
        for package in self.debs:
            files = self.contents(package)
            for path in expected[package]:
                self.assertIn(path, files, package)
        # Nothing outside /usr and /etc, and no test or example binary.
        for package in self.debs:
            for path in self.contents(package):
                self.assertTrue(path in ("/", "") or path.startswith(("/usr/", "/etc/")), f"{package}: {path}")
                self.assertNotIn("ring_trainer", path)
        self.assertNotIn("/usr/lib/libpodscope.a", self.contents("libpodscope"))

    def test_binaries_are_stripped(self):
        for binary in ("usr/bin/podscope-agent", "usr/bin/podscope-coordinator", "usr/lib/libpodscope.so.0.1.0"):
            self.assertNotIn(".symtab", run(["readelf", "-S", os.path.join(self.root, binary)]), binary)

    def test_configs_under_etc_are_conffiles(self):
        for package, config in (("podscope-agent", "agent.yaml"), ("podscope-coordinator", "coordinator.yaml")):
            conffiles = self.control_file(package, "conffiles")
            self.assertIsNotNone(conffiles, package)
            with open(conffiles) as f:
                self.assertEqual(f.read().split(), ["/etc/podscope/" + config])
            with open(os.path.join(self.root, "etc/podscope", config)) as shipped:
                with open(os.path.join(os.path.dirname(__file__), "../../configs", config)) as source:
                    self.assertEqual(shipped.read(), source.read())

    def test_maintainer_scripts_parse_and_are_executable(self):
        for package in ("podscope-agent", "podscope-coordinator"):
            for script in ("postinst", "prerm", "postrm"):
                path = self.control_file(package, script)
                self.assertIsNotNone(path, f"{package} has no {script}")
                run(["sh", "-n", path])
                self.assertEqual(os.stat(path).st_mode & 0o777, 0o755, f"{package} {script}")
        with open(self.control_file("podscope-agent", "postinst")) as f:
            postinst = f.read()
        self.assertIn("systemd-sysusers /usr/lib/sysusers.d/podscope-agent.conf", postinst)
        self.assertIn("[ -d /run/systemd/system ]", postinst)
        # The library runs ldconfig as cpack arranges it: a postinst calling it (CMake 3), or a dpkg trigger
        # activating it (CMake 4 writes `activate-noawait ldconfig` in a triggers file instead).
        ldconfig = [self.control_file("libpodscope", name) for name in ("postinst", "triggers")]
        ldconfig = [path for path in ldconfig if path]
        self.assertTrue(ldconfig, "libpodscope has neither a postinst nor a triggers file")
        for path in ldconfig:
            with open(path) as f:
                self.assertIn("ldconfig", f.read(), path)

    def test_units_verify_with_their_commands_in_the_extracted_root(self):
        if not shutil.which("systemd-analyze"):
            self.skipTest("systemd-analyze not installed")
        for unit in ("podscope-agent.service", "podscope-coordinator.service"):
            # ExecStart= pointed at the extracted binary: verify checks that it exists and is executable.
            with open(os.path.join(self.root, "usr/lib/systemd/system", unit)) as f:
                text = f.read().replace("/usr/bin/", os.path.join(self.root, "usr/bin/"))
            checked = os.path.join(self.scratch, unit)
            with open(checked, "w") as f:
                f.write(text)
            result = subprocess.run(["systemd-analyze", "verify", "--man=no", checked], capture_output=True, text=True)
            # verify only warns (exit 0) about unknown keys: any line about our unit is a failure.
            output = result.stdout + result.stderr
            self.assertEqual(result.returncode, 0, output)
            self.assertNotIn(unit, output)

    def test_sysusers_and_tmpfiles_create_the_user_and_state_in_the_extracted_root(self):
        if not shutil.which("systemd-sysusers") or not shutil.which("systemd-tmpfiles"):
            self.skipTest("systemd-sysusers/systemd-tmpfiles not installed")
        os.makedirs(os.path.join(self.root, "etc"), exist_ok=True)
        sysusers = os.path.join(self.root, "usr/lib/sysusers.d/podscope-agent.conf")
        run(["systemd-sysusers", "--root", self.root, sysusers])
        with open(os.path.join(self.root, "etc/passwd")) as f:
            self.assertRegex(f.read(), r"(?m)^podscope:x:\d+:\d+:podscope agent:/var/lib/podscope:/usr/sbin/nologin$")
        run(["systemd-tmpfiles", "--root", self.root, "--create",
             os.path.join(self.root, "usr/lib/tmpfiles.d/podscope-agent.conf")])
        self.assertTrue(os.path.isdir(os.path.join(self.root, "var/lib/podscope/captures")))

    def test_lintian(self):
        if not shutil.which("lintian"):
            self.skipTest("lintian not installed")
        for package, path in self.debs.items():
            with self.subTest(package=package):
                # Errors fail; warnings and informational tags are shown in the output only.
                result = subprocess.run(["lintian", "--fail-on", "error", path], capture_output=True, text=True)
                self.assertEqual(result.returncode, 0, result.stdout + result.stderr)

    def build_and_run(self, name, command, library_dir):
        """Compiles PROGRAM with `command` + its flags, runs it, and returns its output."""
        source = os.path.join(self.scratch, name + ".cc")
        binary = os.path.join(self.scratch, name)
        with open(source, "w") as f:
            f.write(PROGRAM)
        run(command(source, binary))
        return run([binary], env=dict(os.environ, LD_LIBRARY_PATH=library_dir))

    def test_a_program_links_the_packaged_libpodscope_through_pkg_config(self):
        env = dict(os.environ, PKG_CONFIG_LIBDIR=os.path.join(self.root, "usr/lib/pkgconfig"))
        flags = run(["pkg-config", "--cflags", "--libs", "podscope"], env=env).split()
        self.assertIn("-lpodscope", flags)
        library_dir = os.path.join(self.root, "usr/lib")
        output = self.build_and_run("pkg_config_program",
                                    lambda src, out: ["g++", "-std=c++20", src, "-o", out] + flags, library_dir)
        self.assertEqual(output, "connected=0\n")

    def test_a_program_links_libpodscope_installed_under_a_prefix_through_find_package(self):
        prefix = os.path.join(self.scratch, "prefix")
        run(["cmake", "--install", BUILD, "--component", "client", "--prefix", prefix])
        project = os.path.join(self.scratch, "consumer")
        os.makedirs(project)
        with open(os.path.join(project, "main.cc"), "w") as f:
            f.write(PROGRAM)
        with open(os.path.join(project, "CMakeLists.txt"), "w") as f:
            f.write(textwrap.dedent("""\
                cmake_minimum_required(VERSION 3.25)
                project(consumer CXX)
                set(CMAKE_CXX_STANDARD 20)
                find_package(podscope 0.1 REQUIRED)
                add_executable(consumer main.cc)
                target_link_libraries(consumer PRIVATE podscope::podscope)
                """))
        build = os.path.join(project, "build")
        run(["cmake", "-S", project, "-B", build, "-DCMAKE_PREFIX_PATH=" + prefix])
        run(["cmake", "--build", build])
        # The build tree's RUNPATH finds the prefix's library: no LD_LIBRARY_PATH.
        self.assertEqual(run([os.path.join(build, "consumer")]), "connected=0\n")

    def test_the_python_module_imports_from_the_package_and_finds_the_library(self):
        code = "import podscope, sys; podscope.init(cores=[0], job='py'); podscope.shutdown(); print(podscope.__file__)"
        env = dict(os.environ, PYTHONPATH=os.path.join(self.root, "usr/lib/python3/dist-packages"),
                   LD_LIBRARY_PATH=os.path.join(self.root, "usr/lib"), PODSCOPE_AGENT_SOCKET="/nonexistent/agent.sock")
        output = run(["python3", "-c", code], env=env)
        self.assertTrue(output.strip().endswith("usr/lib/python3/dist-packages/podscope.py"), output)


if __name__ == "__main__":
    unittest.main()
