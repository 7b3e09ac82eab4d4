"""Minimal GGUF reader in NumPy (no llama.cpp code): header, metadata, and dequantised
tensors (F32, F16, Q8_0, Q4_0, Q4_1). Used by numpy_llama_reference.py as an independent
oracle for the Rust loader."""
import struct
import numpy as np

TYPES = {0: "u8", 1: "i8", 2: "u16", 3: "i16", 4: "u32", 5: "i32", 6: "f32", 7: "bool",
         8: "str", 9: "arr", 10: "u64", 11: "i64", 12: "f64"}
SCAL = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
        11: "<q", 12: "<d"}


class Reader:
    def __init__(self, buf):
        self.b, self.o = buf, 0

    def get(self, fmt):
        v = struct.unpack_from(fmt, self.b, self.o)[0]
        self.o += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.get("<Q")
        s = self.b[self.o:self.o + n].decode("utf-8")
        self.o += n
        return s

    def value(self, t):
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.get("<I"), self.get("<Q")
            return [self.value(et) for _ in range(n)]
        return self.get(SCAL[t])


def dequant(raw, ggml_type, n):
    if ggml_type == 0:
        return np.frombuffer(raw, dtype="<f4", count=n).astype(np.float64)
    if ggml_type == 1:
        return np.frombuffer(raw, dtype="<f2", count=n).astype(np.float64)
    nb = n // 32
    if ggml_type == 8:  # Q8_0: f16 scale, 32 x i8
        blk = np.frombuffer(raw, dtype=np.uint8, count=nb * 34).reshape(nb, 34)
        d = blk[:, :2].copy().view("<f2").astype(np.float64)
        q = blk[:, 2:].copy().view(np.int8).astype(np.float64)
        return (q * d).reshape(-1)
    if ggml_type in (2, 3):  # Q4_0 (d, 16 bytes) / Q4_1 (d, m, 16 bytes)
        size = 18 if ggml_type == 2 else 20
        blk = np.frombuffer(raw, dtype=np.uint8, count=nb * size).reshape(nb, size)
        d = blk[:, :2].copy().view("<f2").astype(np.float64)
        qs = blk[:, size - 16:]
        q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float64)
        if ggml_type == 2:
            return ((q - 8.0) * d).reshape(-1)
        m = blk[:, 2:4].copy().view("<f2").astype(np.float64)
        return (q * d + m).reshape(-1)
    raise ValueError(f"unsupported ggml type {ggml_type}")


BYTES = {0: (1, 4), 1: (1, 2), 8: (32, 34), 2: (32, 18), 3: (32, 20)}


def load(path):
    buf = open(path, "rb").read()
    r = Reader(buf)
    assert r.b[:4] == b"GGUF"
    r.o = 4
    version = r.get("<I")
    n_t, n_kv = r.get("<Q"), r.get("<Q")
    meta = {}
    for _ in range(n_kv):
        k = r.string()
        meta[k] = r.value(r.get("<I"))
    infos = []
    for _ in range(n_t):
        name = r.string()
        nd = r.get("<I")
        dims = [r.get("<Q") for _ in range(nd)]
        t = r.get("<I")
        off = r.get("<Q")
        infos.append((name, dims, t, off))
    align = meta.get("general.alignment", 32)
    base = (r.o + align - 1) // align * align
    tensors = {}
    for name, dims, t, off in infos:
        n = int(np.prod(dims))
        blk, size = BYTES[t]
        raw = buf[base + off: base + off + n // blk * size]
        # GGUF dims are innermost first; numpy shape is the reverse.
        tensors[name] = dequant(raw, t, n).reshape(list(reversed(dims)))
    return version, meta, tensors, infos
