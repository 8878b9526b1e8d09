#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (fuzz/corpus/<target>/), small valid inputs the fuzzer
mutates: a minimal GGUF with a byte-level BPE vocabulary and a tensor, texts for the tokenizer,
request bodies of every shape, a safetensors file, a config.json and a tokenizer.json.
Deterministic; the files are committed. Usage: scripts/make_fuzz_seeds.py"""

import json
import os
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fuzz", "corpus")


def byte_tokens():
    """GPT-2's byte-to-unicode table: the 256 byte tokens of a byte-level BPE vocabulary."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    table, n = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + n)
            n += 1
    return [table[b] for b in range(256)], table


def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def gguf_kv(key, vtype, payload):
    return gguf_string(key) + struct.pack("<I", vtype) + payload


def gguf_array(etype, items, pack):
    return struct.pack("<IQ", etype, len(items)) + b"".join(pack(x) for x in items)


def minimal_gguf():
    tokens, table = byte_tokens()
    merges = [f"{table[ord('h')]} {table[ord('e')]}", f"{table[ord('l')]} {table[ord('l')]}", f"he ll"]
    tokens += ["he", "ll", "hell", "<|im_start|>", "<|im_end|>", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"]
    types = [1] * (len(tokens) - 4) + [3, 3, 3, 3]
    kvs = [
        gguf_kv("general.architecture", 8, gguf_string("qwen2")),
        gguf_kv("general.alignment", 4, struct.pack("<I", 32)),
        gguf_kv("qwen2.context_length", 4, struct.pack("<I", 256)),
        gguf_kv("qwen2.rope.freq_base", 6, struct.pack("<f", 10000.0)),
        gguf_kv("tokenizer.ggml.model", 8, gguf_string("gpt2")),
        gguf_kv("tokenizer.ggml.pre", 8, gguf_string("qwen2")),
        gguf_kv("tokenizer.ggml.tokens", 9, gguf_array(8, tokens, gguf_string)),
        gguf_kv("tokenizer.ggml.token_type", 9, gguf_array(5, types, lambda t: struct.pack("<i", t))),
        gguf_kv("tokenizer.ggml.merges", 9, gguf_array(8, merges, gguf_string)),
        gguf_kv("tokenizer.ggml.bos_token_id", 4, struct.pack("<I", len(tokens) - 2)),
        gguf_kv("tokenizer.ggml.eos_token_id", 4, struct.pack("<I", len(tokens) - 1)),
        gguf_kv("tokenizer.ggml.add_bos_token", 7, struct.pack("<?", True)),
        gguf_kv("tokenizer.chat_template", 8, gguf_string(
            "{% for m in messages %}{% if m['role'] == 'user' %}<｜User｜>{{ m['content'] }}{% endif %}{% endfor %}"
            "{% if add_generation_prompt %}<｜Assistant｜><think>\\n{% endif %}")),
    ]
    tensor = gguf_string("token_embd.weight") + struct.pack("<I", 2) + struct.pack("<QQ", 4, 2) + struct.pack("<I", 0) + struct.pack("<Q", 0)
    head = b"GGUF" + struct.pack("<IQQ", 3, 1, len(kvs)) + b"".join(kvs) + tensor
    head += b"\0" * ((32 - len(head) % 32) % 32)
    return head + struct.pack("<8f", *[0.5 * i for i in range(8)])


def safetensors():
    header = json.dumps({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
                         "b": {"dtype": "F16", "shape": [2], "data_offsets": [16, 20]},
                         "__metadata__": {"format": "pt"}}).encode()
    return struct.pack("<Q", len(header)) + header + struct.pack("<4f", 1, 2, 3, 4) + b"\x00\x3c\x00\x40"


def write(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode("utf-8"))


def main():
    write("fuzz_gguf", "minimal.gguf", minimal_gguf())
    write("fuzz_gguf", "header-only.gguf", b"GGUF" + struct.pack("<IQQ", 3, 0, 0))
    for i, text in enumerate(["\x00Hello world", "\x01<|im_start|>user\nhi<|im_end|>", "\x00 naïve café 日本語 🙂\n\t  x",
                              "\x0012345 67.89 -0.5e10", "\x01<｜User｜>Why?<｜Assistant｜><think>\n", "\x00\xff\xfe invalid"]):
        write("fuzz_tokenizer", f"text{i}", text.encode("utf-8", "surrogateescape") if i != 5 else b"\x00\xff\xfe invalid \xc3")
    chat = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                         {"role": "assistant", "content": "Hello"},
                         {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
            "max_tokens": 16, "temperature": 0.6, "top_p": 0.95, "top_k": 40, "min_p": 0.05, "stream": True,
            "stream_options": {"include_usage": True}, "stop": ["\n\n", "END"], "seed": 7, "n": 2,
            "logprobs": True, "top_logprobs": 3, "logit_bias": {"42": -100}, "presence_penalty": 0.5,
            "frequency_penalty": 0.1, "repeat_penalty": 1.1, "user": "u1", "prompt_cache_key": "k",
            "reasoning_format": "deepseek", "reasoning_budget": 100, "ignore_eos": False}
    write("fuzz_request", "chat.json", "\x01" + json.dumps(chat))
    write("fuzz_request", "chat-min.json", "\x01" + json.dumps({"messages": [{"role": "user", "content": "x"}]}))
    write("fuzz_request", "completion.json", "\x00" + json.dumps({"prompt": "Once upon", "max_tokens": 8, "logprobs": 2, "echo": False}))
    write("fuzz_request", "completion-ids.json", "\x00" + json.dumps({"prompt": [1, 2, 3], "max_completion_tokens": 4}))
    write("fuzz_safetensors", "small.safetensors", safetensors())
    config = {"architectures": ["Qwen2ForCausalLM"], "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 256, "vocab_size": 160,
              "rope_theta": 10000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2,
              "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}}
    write("fuzz_hf_files", "config.json", "\x00" + json.dumps(config))
    tokens, _ = byte_tokens()
    vocab = {t: i for i, t in enumerate(tokens[:150])}
    tok = {"model": {"type": "BPE", "vocab": vocab, "merges": ["a b", "ab c"]},
           "added_tokens": [{"id": 150, "content": "<|im_start|>", "special": True}, {"id": 151, "content": "<|im_end|>", "special": True}],
           "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\s+"}}]}}
    write("fuzz_hf_files", "tokenizer.json", "\x01" + json.dumps(tok))


if __name__ == "__main__":
    main()
