"""Checks .github/workflows/*.yml here, where GitHub's runners cannot run
them: each file parses as YAML and follows the workflow syntax GitHub
documents ("Workflow syntax for GitHub Actions"), as a JSON Schema of the
keys this project uses and their types, with unknown keys refused; every
job runs on a hosted macOS or Windows image, every step either runs a
command or uses a pinned action, and the jobs the README promises exist.

Run by make test-workflows (make test): python3 -m unittest over this file.
"""

import glob
import os
import re
import unittest

import jsonschema
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))

STRINGS = {"type": "array", "items": {"type": "string"}}
STRING_OR_LIST = {"anyOf": [{"type": "string"}, STRINGS]}
ENV = {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}}
BRANCH_FILTER = {
    "anyOf": [
        {"type": "null"},
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {k: STRINGS for k in ("branches", "branches-ignore", "tags", "tags-ignore", "paths", "paths-ignore")}
            | {"types": STRINGS},
        },
    ]
}
STEP = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "id": {"type": "string"},
        "name": {"type": "string"},
        "if": {"type": ["string", "boolean"]},
        "uses": {"type": "string", "pattern": r"^[\w.-]+/[\w./-]+@[\w.-]+$"},
        "run": {"type": "string", "minLength": 1},
        "shell": {"enum": ["bash", "pwsh", "python", "sh", "cmd", "powershell"]},
        "with": ENV,
        "env": ENV,
        "working-directory": {"type": "string"},
        "continue-on-error": {"type": ["boolean", "string"]},
        "timeout-minutes": {"type": "number"},
    },
    "oneOf": [{"required": ["run"], "not": {"required": ["uses"]}}, {"required": ["uses"], "not": {"required": ["run"]}}],
}
DEFAULTS = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"run": {"type": "object", "additionalProperties": False, "properties": {"shell": STEP["properties"]["shell"], "working-directory": {"type": "string"}}}},
}
JOB = {
    "type": "object",
    "additionalProperties": False,
    "required": ["runs-on", "steps"],
    "properties": {
        "name": {"type": "string"},
        "runs-on": STRING_OR_LIST,
        "needs": STRING_OR_LIST,
        "if": {"type": ["string", "boolean"]},
        "permissions": {"anyOf": [{"type": "string"}, ENV]},
        "environment": {"type": ["string", "object"]},
        "concurrency": {"type": ["string", "object"]},
        "outputs": ENV,
        "env": ENV,
        "defaults": DEFAULTS,
        "timeout-minutes": {"type": "number"},
        "continue-on-error": {"type": ["boolean", "string"]},
        "strategy": {"type": "object"},
        "steps": {"type": "array", "minItems": 1, "items": STEP},
    },
}
WORKFLOW = {
    "type": "object",
    "additionalProperties": False,
    "required": ["on", "jobs"],
    "properties": {
        "name": {"type": "string"},
        "run-name": {"type": "string"},
        "on": {
            "type": "object",
            "additionalProperties": False,
            "minProperties": 1,
            "properties": {
                "push": BRANCH_FILTER,
                "pull_request": BRANCH_FILTER,
                "workflow_dispatch": {"type": ["null", "object"]},
                "schedule": {"type": "array", "items": {"type": "object", "required": ["cron"]}},
            },
        },
        "permissions": {"anyOf": [{"type": "string"}, ENV]},
        "env": ENV,
        "defaults": DEFAULTS,
        "concurrency": {"type": ["string", "object"]},
        "jobs": {
            "type": "object",
            "minProperties": 1,
            "propertyNames": {"pattern": r"^[A-Za-z_][A-Za-z0-9_-]*$"},
            "additionalProperties": JOB,
        },
    },
}

# GitHub's hosted images for the two systems (runner-images).
HOSTED = re.compile(r"^(macos-(13|14|15|latest)|windows-(2019|2022|2025|latest))$")


def load(path):
    with open(path) as f:
        doc = yaml.safe_load(f)
    # YAML 1.1 (PyYAML) reads the key `on` as true; GitHub reads it as "on".
    if isinstance(doc, dict) and True in doc:
        doc["on"] = doc.pop(True)
    return doc


class Workflows(unittest.TestCase):
    def files(self):
        files = sorted(glob.glob(os.path.join(HERE, "workflows", "*.yml")))
        self.assertEqual([os.path.basename(f) for f in files], ["macos.yml", "windows.yml"])
        return files

    def test_schema(self):
        for path in self.files():
            with self.subTest(workflow=os.path.basename(path)):
                jsonschema.validate(load(path), WORKFLOW)

    def test_schema_refuses(self):
        # The schema is not a check that cannot fail.
        doc = load(os.path.join(HERE, "workflows", "macos.yml"))
        for mutate in (
            lambda d: d["jobs"]["unit"].pop("runs-on"),
            lambda d: d["jobs"]["unit"]["steps"].append({"name": "both", "run": "true", "uses": "actions/checkout@v4"}),
            lambda d: d["jobs"]["unit"].update({"runs_on": "macos-14"}),
            lambda d: d["jobs"]["unit"]["steps"].append({"uses": "actions/checkout"}),
        ):
            bad = load(os.path.join(HERE, "workflows", "macos.yml"))
            mutate(bad)
            with self.assertRaises(jsonschema.ValidationError):
                jsonschema.validate(bad, WORKFLOW)
        jsonschema.validate(doc, WORKFLOW)

    def test_runners_and_jobs(self):
        want = {"macos.yml": {"unit", "app", "e2e"}, "windows.yml": {"unit", "e2e"}}
        for path in self.files():
            doc = load(path)
            name = os.path.basename(path)
            self.assertEqual(set(doc["jobs"]), want[name], name)
            for job, spec in doc["jobs"].items():
                self.assertRegex(spec["runs-on"], HOSTED, f"{name} {job}")
                runs = "\n".join(s.get("run", "") for s in spec["steps"])
                if job == "unit":
                    self.assertIn("go test", runs)
                    self.assertIn("make cross", runs)
                if job == "e2e":
                    self.assertIn("./e2e/hosted", runs)
                    self.assertIn("RUNOS_HOSTED_E2E", str(spec["steps"]))
            if name == "macos.yml":
                self.assertIn("make desktop-macos", str(doc["jobs"]["app"]["steps"]))


if __name__ == "__main__":
    unittest.main()
