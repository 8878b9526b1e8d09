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


GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q8_0 = 0, 1, 2, 8


def tensor_bytes(ggml_type, values):
    """values (a flat list, a multiple of 32 long for the block types) in a GGUF tensor type."""
    if ggml_type == GGML_F32:
        return struct.pack(f"<{len(values)}f", *values)
    if ggml_type == GGML_F16:
        return struct.pack(f"<{len(values)}e", *values)
    out = b""
    for i in range(0, len(values), 32):
        block = values[i:i + 32]
        amax = max(abs(v) for v in block) or 1.0
        if ggml_type == GGML_Q8_0:
            d = amax / 127
            out += struct.pack("<e", d) + bytes((round(v / d) & 0xFF) for v in block)
        else:  # Q4_0: 16 bytes of nibble pairs (low nibbles the first 16 values), offset 8
            d = amax / 8
            q = [max(0, min(15, round(v / d) + 8)) for v in block]
            out += struct.pack("<e", d) + bytes(q[j] | (q[j + 16] << 4) for j in range(16))
    return out


def tiny_model(matrix_type, tied=False):
    """A whole Qwen2 model small enough to mutate: 1 layer, 32-wide, 2 query heads sharing 1 KV
    head of 16, a 64-wide FFN, 32 tokens; matrices in matrix_type, norms and biases in F32."""
    n_embd, n_ff, n_vocab, head_dim = 32, 64, 32, 16
    kvs = [
        gguf_kv("general.architecture", 8, gguf_string("qwen2")),
        gguf_kv("general.alignment", 4, struct.pack("<I", 32)),
        gguf_kv("qwen2.context_length", 4, struct.pack("<I", 64)),
        gguf_kv("qwen2.embedding_length", 4, struct.pack("<I", n_embd)),
        gguf_kv("qwen2.block_count", 4, struct.pack("<I", 1)),
        gguf_kv("qwen2.feed_forward_length", 4, struct.pack("<I", n_ff)),
        gguf_kv("qwen2.attention.head_count", 4, struct.pack("<I", n_embd // head_dim)),
        gguf_kv("qwen2.attention.head_count_kv", 4, struct.pack("<I", 1)),
        gguf_kv("qwen2.rope.freq_base", 6, struct.pack("<f", 10000.0)),
        gguf_kv("qwen2.attention.layer_norm_rms_epsilon", 6, struct.pack("<f", 1e-6)),
    ]
    shapes = [("token_embd.weight", [n_embd, n_vocab], matrix_type), ("output_norm.weight", [n_embd], GGML_F32)]
    if not tied:
        shapes.append(("output.weight", [n_embd, n_vocab], matrix_type))
    shapes += [("blk.0.attn_norm.weight", [n_embd], GGML_F32), ("blk.0.attn_q.weight", [n_embd, n_embd], matrix_type),
               ("blk.0.attn_k.weight", [n_embd, head_dim], matrix_type), ("blk.0.attn_v.weight", [n_embd, head_dim], matrix_type),
               ("blk.0.attn_q.bias", [n_embd], GGML_F32), ("blk.0.attn_k.bias", [head_dim], GGML_F32),
               ("blk.0.attn_v.bias", [head_dim], GGML_F32), ("blk.0.attn_output.weight", [n_embd, n_embd], matrix_type),
               ("blk.0.ffn_norm.weight", [n_embd], GGML_F32), ("blk.0.ffn_gate.weight", [n_embd, n_ff], matrix_type),
               ("blk.0.ffn_up.weight", [n_embd, n_ff], matrix_type), ("blk.0.ffn_down.weight", [n_ff, n_embd], matrix_type)]
    infos, data = b"", b""
    for k, (name, shape, t) in enumerate(shapes):
        count = 1
        for d in shape:
            count *= d
        values = [1.0 if name.endswith("norm.weight") else ((k * 7 + i * 13) % 17 - 8) / 32 for i in range(count)]
        infos += gguf_string(name) + struct.pack("<I", len(shape)) + struct.pack(f"<{len(shape)}Q", *shape)
        infos += struct.pack("<IQ", t, len(data))
        data += tensor_bytes(t, values)
        data += b"\0" * ((32 - len(data) % 32) % 32)
    head = b"GGUF" + struct.pack("<IQQ", 3, len(shapes), len(kvs)) + b"".join(kvs) + infos
    head += b"\0" * ((32 - len(head) % 32) % 32)
    return head + data


def http_request(method, path, body=None, headers=()):
    """One HTTP/1.1 request as a client writes it."""
    data = json.dumps(body).encode() if body is not None else b""
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"] + list(headers)
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(data)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


def http_seeds():
    """A request to every route of the three API families, and a few transport shapes."""
    chat = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
    yield "chat", http_request("POST", "/v1/chat/completions", chat)
    yield "chat-stream", http_request("POST", "/v1/chat/completions", dict(chat, stream=True, stream_options={"include_usage": True},
                                                                        logprobs=True, top_logprobs=2))
    yield "completions", http_request("POST", "/v1/completions", {"prompt": "Once", "max_tokens": 2, "logprobs": 1, "echo": True})
    yield "completion", http_request("POST", "/completion", {"prompt": "Once", "n_predict": 2, "n_probs": 2, "stream": True})
    yield "tokenize", http_request("POST", "/tokenize", {"content": "hi there", "with_pieces": True})
    yield "detokenize", http_request("POST", "/detokenize", {"tokens": [1, 2, 3]})
    yield "apply-template", http_request("POST", "/apply-template", chat)
    yield "answer-now", http_request("POST", "/v1/answer_now", {"id": "chatcmpl-x"})
    yield "ollama-chat", http_request("POST", "/api/chat", {"model": "tiny", "messages": chat["messages"], "options": {"num_predict": 2}})
    yield "ollama-generate", http_request("POST", "/api/generate", {"model": "tiny", "prompt": "hi", "stream": False, "raw": True})
    yield "ollama-show", http_request("POST", "/api/show", {"model": "tiny"})
    for path in ("/v1/models", "/health", "/health/live", "/health/ready", "/props", "/slots", "/metrics", "/api/tags",
                 "/api/ps", "/api/version", "/", "/index.html"):
        yield "get" + path.replace("/", "-"), http_request("GET", path)
    yield "pipelined", http_request("GET", "/health") + http_request("POST", "/tokenize", {"content": "x"}) + http_request("GET", "/v1/models")
    yield "options-cors", http_request("OPTIONS", "/v1/chat/completions", headers=["Origin: http://x", "Access-Control-Request-Method: POST"])
    body = json.dumps(chat).encode()
    yield "chunked", (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                      + f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n")


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
    for name, t in (("f32", GGML_F32), ("f16", GGML_F16), ("q8_0", GGML_Q8_0), ("q4_0", GGML_Q4_0)):
        write("fuzz_model", f"tiny-{name}.gguf", tiny_model(t))
    write("fuzz_model", "tiny-q8_0-tied.gguf", tiny_model(GGML_Q8_0, tied=True))
    for name, data in http_seeds():
        write("fuzz_http", name + ".http", data)
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
    write("fuzz_request", "ollama-generate.json", "\x02" + json.dumps(
        {"model": "tiny", "prompt": "Why?", "system": "Be brief.", "raw": False, "stream": False, "think": True,
         "options": {"num_predict": 8, "temperature": 0.6, "top_k": 40, "seed": 1, "stop": ["\n"]}}))
    write("fuzz_request", "ollama-chat.json", "\x03" + json.dumps(
        {"model": "tiny", "messages": [{"role": "system", "content": "x"}, {"role": "user", "content": "hi"},
                                       {"role": "assistant", "content": "yo"}], "think": False, "options": {"top_p": 0.9}}))
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
