"""The README's test command is the one CI runs, and its main-job command targets the default grid."""

import re

import yaml


def test_ci_runs_the_readme_test_command(repo_root):
    """CI runs the README's test command step by step, in its order (it builds the docs before pytest)."""
    readme = (repo_root / "README.md").read_text()
    ci = (repo_root / ".ci" / "run").read_text()
    blocks = re.findall(r"```bash\n(.*?)\n```", readme, re.S)
    test_cmd = [b for b in blocks if "pytest" in b]
    assert len(test_cmd) == 1, "README must have exactly one test command"
    position = 0
    for step in test_cmd[0].strip().split(" && "):
        found = ci.find(step, position)
        assert found >= 0, f"CI does not run {step!r} after the README's previous steps"
        position = found + len(step)


def test_readme_main_command_is_offline(repo_root):
    readme = (repo_root / "README.md").read_text()
    main = [b for b in re.findall(r"```bash\n(.*?)\n```", readme, re.S) if "-e ." in b and "pytest" not in b]
    assert len(main) == 1
    assert "data_dir=../shared/data" in main[0]


def test_installs_use_the_constraints_file(repo_root):
    """pyproject.toml has ranges; the exact pins live in constraints.txt, which every install command uses."""
    readme = (repo_root / "README.md").read_text()
    installs = [b for b in re.findall(r"```bash\n(.*?)\n```", readme, re.S) if " -e " in b]
    assert len(installs) == 2 and all("-c constraints.txt" in b for b in installs)
    assert "-c constraints.txt" in (repo_root / ".ci" / "run").read_text()
    pins = dict(
        line.split("==")
        for line in (repo_root / "constraints.txt").read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert pins["torch"] == "2.13.0" and pins["snakemake"] and pins["pytest"]
    norm = {k.lower().replace("_", "-"): v for k, v in pins.items()}
    env = yaml.safe_load((repo_root / "envs" / "lmbias.yaml").read_text())
    env_pins = [p for d in env["dependencies"] if isinstance(d, dict) for p in d["pip"]]
    assert env_pins and all(
        norm[name.lower().replace("_", "-")] == version for name, version in (p.split("==") for p in env_pins)
    ), env_pins
    deps = (repo_root / "pyproject.toml").read_text().split("dependencies = [", 1)[1].split("[project.scripts]")[0]
    assert "==" not in deps, "pyproject.toml declares ranges, not pins"
