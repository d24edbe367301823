"""Expected chat-template renders for tests/core/jinja (see scripts/make-chat-fixtures).

Uses transformers' own template compiler (the environment apply_chat_template
renders with: ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True),
loop controls, raise_exception, its tojson) and passes the variables
apply_chat_template passes (messages, tools=None, documents=None,
add_generation_prompt, the special tokens).
"""

import glob
import json
import os
import sys

from transformers.utils.chat_template_utils import _compile_jinja_template


def main(out_dir: str) -> None:
    with open(os.path.join(out_dir, "cases.json"), encoding="utf-8") as f:
        spec = json.load(f)
    for old in glob.glob(os.path.join(out_dir, "*.*.txt")):
        os.remove(old)
    for family, tokens in spec["families"].items():
        with open(os.path.join(out_dir, family + ".jinja"), encoding="utf-8", newline="") as f:
            template = _compile_jinja_template(f.read())
        for case in spec["cases"]:
            kwargs = dict(
                messages=case["messages"],
                tools=None,
                documents=None,
                add_generation_prompt=case["add_generation_prompt"],
                bos_token=tokens["bos_token"],
                eos_token=tokens["eos_token"],
            )
            base = os.path.join(out_dir, f"{family}.{case['name']}")
            try:
                text, suffix = template.render(**kwargs), ".txt"
            except Exception as e:  # noqa: BLE001 -- the message is the fixture
                text, suffix = str(e), ".error.txt"
            with open(base + suffix, "w", encoding="utf-8", newline="") as f:
                f.write(text)
            print(f"{family}.{case['name']}{suffix}")


if __name__ == "__main__":
    main(sys.argv[1])
