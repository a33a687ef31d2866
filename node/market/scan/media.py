"""Text hidden in a skill's pictures and sounds, read without rendering them.

A skill ships images and audio the scanner does not read as instructions, but an agent can be
told to decode them ("read the note in the picture's metadata"). Two places are read here, both
bounded whatever the file claims:

- the printable strings of the file (EXIF, PNG text chunks, ID3 tags, a tail after the picture):
  runs of ``RUN_BYTES`` printable ASCII or more, ``MAX_TEXT_CHARS`` in all;
- the least significant bits of a PNG's pixels, per channel (the classic steganography of a
  text in the alpha or a colour channel): only the first ``MAX_RAW_BYTES`` of pixel data are
  inflated and unfiltered, and a run counts only if it reads as words (``WORDS``), so the bit
  noise of a photograph or the stripes of a flat icon are not taken for text.

Pixels drawn as text (OCR), QR codes and audio samples are not read: a scan reports what it
did not read rather than pretending (docs/skills-safety.md).
"""

from __future__ import annotations

import re
import struct
import zlib

RUN_BYTES = 32
MAX_TEXT_CHARS = 16_000
RUN = re.compile(rb"[\x20-\x7e]{%d,4000}" % RUN_BYTES)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_CHUNKS = 10_000
MAX_RAW_BYTES = 64 * 1024  # pixel bytes inflated for the bit plane: a 2 KB message needs 16 KB
MAX_SAMPLES = 16_000  # samples per channel read for their low bit
LSB_RUN = re.compile(rb"[\x20-\x7e]{24,2000}")
WORDS = re.compile(rb"(?:[A-Za-z]{2,20}[ ,.:;'\"/-]{1,3}){4}")
BYTES_PER_PIXEL = {0: 1, 2: 3, 4: 2, 6: 4}  # PNG colour types at 8 bits a sample


def media_strings(data: bytes, extension: str) -> str:
    """What a media file carries as text: its printable strings, then (PNG) any text in the low
    bit of a channel, one a line, ``MAX_TEXT_CHARS`` at most. Never raises for a broken file."""
    lines: list[str] = []
    size = 0
    for match in RUN.finditer(data):
        text = match.group().decode("ascii")
        lines.append(text)
        size += len(text) + 1
        if size >= MAX_TEXT_CHARS:
            break
    if extension == "png":
        lines.extend(png_bit_plane_text(data))
    return "\n".join(lines)[:MAX_TEXT_CHARS]


def png_bit_plane_text(data: bytes) -> list[str]:
    """Texts written in the least significant bit of one channel of a PNG (8-bit, not interlaced)."""
    try:
        header, raw = _png_pixels(data)
    except (ValueError, zlib.error, struct.error):
        return []
    if header is None:
        return []
    width, _height, depth, colour, interlace = header
    pixel = BYTES_PER_PIXEL.get(colour)
    if depth != 8 or interlace != 0 or pixel is None or width <= 0:
        return []
    pixels = _unfilter(raw, width * pixel, pixel)
    found: list[str] = []
    for channel in range(pixel):
        samples = pixels[channel::pixel][:MAX_SAMPLES]
        packed = bytes(sum(((samples[index + bit] & 1) << (7 - bit)) for bit in range(8))
                       for index in range(0, len(samples) - 7, 8))
        for match in LSB_RUN.finditer(packed):
            if WORDS.search(match.group()):
                found.append(match.group().decode("ascii"))
    return found


def _png_pixels(data: bytes) -> tuple[tuple[int, int, int, int, int] | None, bytes]:
    if not data.startswith(PNG_SIGNATURE):
        return None, b""
    position, header, compressed = len(PNG_SIGNATURE), None, []
    for _ in range(MAX_CHUNKS):
        if position + 8 > len(data):
            break
        (length,) = struct.unpack(">I", data[position:position + 4])
        kind = data[position + 4:position + 8]
        body = data[position + 8:position + 8 + length]
        position += 12 + length
        if kind == b"IHDR" and len(body) == 13:
            width, height, depth, colour, _compression, _filter, interlace = struct.unpack(">IIBBBBB", body)
            header = (width, height, depth, colour, interlace)
        elif kind == b"IDAT":
            compressed.append(body)
        elif kind == b"IEND":
            break
    return header, zlib.decompressobj().decompress(b"".join(compressed), MAX_RAW_BYTES)


def _unfilter(raw: bytes, stride: int, pixel: int) -> bytes:
    """PNG rows with their filters undone (None, Sub, Up, Average, Paeth), as far as ``raw`` goes."""
    rows: list[bytes] = []
    previous = bytearray(stride)
    position = 0
    while position + 1 + stride <= len(raw):
        kind = raw[position]
        line = bytearray(raw[position + 1:position + 1 + stride])
        position += 1 + stride
        for index in range(stride):
            left = line[index - pixel] if index >= pixel else 0
            up = previous[index]
            corner = previous[index - pixel] if index >= pixel else 0
            if kind == 1:
                line[index] = (line[index] + left) & 255
            elif kind == 2:
                line[index] = (line[index] + up) & 255
            elif kind == 3:
                line[index] = (line[index] + ((left + up) >> 1)) & 255
            elif kind == 4:
                estimate = left + up - corner
                distances = (abs(estimate - left), abs(estimate - up), abs(estimate - corner))
                nearest = left if distances[0] <= distances[1] and distances[0] <= distances[2] else (
                    up if distances[1] <= distances[2] else corner)
                line[index] = (line[index] + nearest) & 255
        rows.append(bytes(line))
        previous = line
    return b"".join(rows)
