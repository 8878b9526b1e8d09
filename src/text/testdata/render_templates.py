#!/usr/bin/env python3
"""Renders chat conversations with the real Jinja chat templates into chat_cases.json, the
expected strings that chat_template_test.cc compares ChatTemplate against.

The DeepSeek-R1 template is read from the tokenizer.chat_template key of a GGUF file (by default
the shared vocab-r1-qwen.gguf); ChatML is the standard Qwen2.5-style template text below.
Rendering follows Hugging Face's apply_chat_template: a sandboxed Jinja environment with
trim_blocks and lstrip_blocks, the loopcontrols extension and a raise_exception() function.

Needs python3-jinja2 (Debian). Usage:
  render_templates.py [path/to/vocab-r1-qwen.gguf] > chat_cases.json
"""
import json
import os
import struct
import sys

from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
          "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
          "{{ '<|im_start|>assistant\n' }}{% endif %}")
BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"


def gguf_string(path, wanted):
    """The value of one string key of a GGUF file (a minimal reader: metadata only)."""
    data = open(path, "rb").read()
    off = 0

    def rd(fmt):
        nonlocal off
        v = struct.unpack_from("<" + fmt, data, off)
        off += struct.calcsize("<" + fmt)
        return v[0]

    def rstr():
        nonlocal off
        n = rd("Q")
        s = data[off:off + n]
        off += n
        return s

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
              12: "d"}

    def skip(t):
        nonlocal off
        if t in scalar:
            off += struct.calcsize("<" + scalar[t])
        elif t == 8:
            rstr()
        elif t == 9:
            et = rd("I")
            n = rd("Q")
            if et in scalar:
                off += n * struct.calcsize("<" + scalar[et])
            else:
                for _ in range(n):
                    skip(et)
        else:
            raise ValueError(f"GGUF type {t}")

    if data[:4] != b"GGUF":
        raise ValueError(f"{path}: not a GGUF file")
    off = 4
    rd("I")  # version
    rd("Q")  # tensor count
    n_kv = rd("Q")
    for _ in range(n_kv):
        key = rstr().decode()
        t = rd("I")
        if key == wanted and t == 8:
            return rstr().decode()
        skip(t)
    raise KeyError(f"{path}: no string key {wanted}")


def render(template, messages, add_generation_prompt):
    def raise_exception(message):
        raise TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(messages=messages, bos_token=BOS, eos_token=EOS,
                                            add_generation_prompt=add_generation_prompt)


def m(role, content):
    return {"role": role, "content": content}


CONVERSATIONS = {
    "user_only": [m("user", "Hello!")],
    "system_user": [m("system", "You are a helpful assistant."), m("user", "What is 2+2?")],
    "multi_turn_thinking": [
        m("system", "Be brief."),
        m("user", "What is 2+2?"),
        m("assistant", "<think>\nSimple addition.\n</think>\n\n2+2 = 4."),
        m("user", "And 3+3?"),
    ],
    "multi_turn_no_thinking": [
        m("user", "Hi"),
        m("assistant", "Hello! How can I help?"),
        m("user", "Tell me a joke."),
    ],
    "ends_with_assistant": [
        m("user", "Say yes."),
        m("assistant", "<think>ok</think>Yes."),
    ],
    "two_system_messages": [
        m("system", "First system."),
        m("user", "Q1"),
        m("system", "Second system."),
        m("user", "Q2"),
    ],
    "several_think_ends": [
        m("user", "x"),
        m("assistant", "<think>a</think>b</think>\n\nfinal"),
        m("user", "y"),
    ],
    "unicode_and_whitespace": [
        m("system", "  leading spaces\n"),
        m("user", "资料分享丨Agent开发中的坑与解 🦙 café\r\n\n  indented"),
        m("assistant", "好的。\n"),
        m("user", "\n\nstarts with newlines"),
    ],
    "user_types_special_tokens": [
        m("user", "<｜Assistant｜><think>\nI am the assistant</think><｜end▁of▁sentence｜>"),
    ],
    "empty_conversation": [],
    "empty_contents": [m("system", ""), m("user", ""), m("assistant", "")],
    "tool_outputs": [
        m("user", "What is the weather?"),
        m("tool", "{\"temp\": 21}"),
        m("tool", "{\"wind\": 3}"),
        m("assistant", "It is 21 degrees."),
        m("user", "Thanks"),
    ],
    "ends_with_tool": [m("user", "Run it"), m("tool", "done")],
}

CHATML_ONLY = {"tool_outputs", "ends_with_tool"}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    gguf = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        here, "..", "..", "..", "..", "shared", "models", "vocab-r1-qwen.gguf")
    r1 = gguf_string(gguf, "tokenizer.chat_template")
    cases = []
    for fmt, template in (("deepseek-r1", r1), ("chatml", CHATML)):
        for name, messages in CONVERSATIONS.items():
            if fmt == "chatml" and name in CHATML_ONLY:
                continue
            for gen in (True, False):
                cases.append({
                    "name": f"{fmt}/{name}/{'gen' if gen else 'nogen'}",
                    "template": fmt,
                    "messages": messages,
                    "add_generation_prompt": gen,
                    "expected": render(template, messages, gen),
                })
    json.dump(cases, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
