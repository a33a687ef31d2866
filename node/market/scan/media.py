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

- the least significant bit of a WAV file's PCM samples, per channel (the same text-in-noise
  trick in sound): at most ``MAX_SAMPLES`` samples a channel, read as words like the PNG's;
- an archive after the picture or sound (a ZIP appended past a PNG's end: its strings are
  compressed, so the printable strings do not show them): read with ``zipfile`` under strict
  bounds (``MAX_ZIP_MEMBERS`` stored or deflated members, ``MAX_MEMBER_BYTES`` inflated from
  each, whatever sizes the archive declares; encrypted ones skipped), and named
  (``hidden_archive``): an archive riding inside a picture has no honest use in a skill.

Pixels drawn as text (OCR) and QR codes are not read: that needs a text-recognition model or
an image decoder we do not ship; a scan reports what it did not read rather than pretending
(docs/skills-safety.md).
"""

from __future__ import annotations

import io
import re
import struct
import zipfile
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
MAX_WAV_CHUNKS = 64
MAX_ZIP_MEMBERS = 16
MAX_MEMBER_BYTES = 64 * 1024  # inflated from one member, whatever it declares
ZIP_LOCAL_HEADER = b"PK\x03\x04"
ZIP_END = b"PK\x05\x06"


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
    if extension == "wav":
        lines.extend(wav_low_bit_text(data))
    lines.extend(appended_archive(data)[1])
    return "\n".join(lines)[:MAX_TEXT_CHARS]


def appended_archive(data: bytes) -> tuple[list[str], list[str]]:
    """An archive carried inside a media file: (member names, the text of its stored or deflated
    members). Both empty when there is none or it cannot be read. Bounded: ``MAX_ZIP_MEMBERS``
    members, ``MAX_MEMBER_BYTES`` inflated from each (a bomb yields its first bytes), the central
    directory read from a file the folder already capped at its one-file limit."""
    start = data.find(ZIP_LOCAL_HEADER, 4)
    if start == -1 or data.rfind(ZIP_END) < start:
        return [], []
    names: list[str] = []
    texts: list[str] = []
    try:
        with zipfile.ZipFile(io.BytesIO(data[start:])) as archive:
            for info in archive.infolist()[:MAX_ZIP_MEMBERS]:
                names.append(info.filename[:200])
                if info.flag_bits & 0x1 or info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED) \
                        or info.is_dir():
                    continue
                with archive.open(info) as member:
                    content = member.read(MAX_MEMBER_BYTES)
                texts.extend(match.group().decode("ascii") for match in RUN.finditer(content))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, RuntimeError, NotImplementedError, ValueError, EOFError,
            OSError, zlib.error, struct.error):
        return names, texts
    return names, texts


def wav_low_bit_text(data: bytes) -> list[str]:
    """Texts written in the least significant bit of a PCM WAV's samples, one channel at a time."""
    try:
        layout = _wav_layout(data)
    except (ValueError, struct.error):
        return []
    if layout is None:
        return []
    channels, width, samples = layout
    frame = channels * width
    found: list[str] = []
    for channel in range(channels):
        # The low byte of a little-endian sample holds its low bit (8-bit samples: the byte itself).
        found.extend(_low_bit_words(samples[channel * width::frame][:MAX_SAMPLES]))
    return found


def _wav_layout(data: bytes) -> tuple[int, int, bytes] | None:
    """(channels, bytes a sample, sample data) of an uncompressed PCM WAV, or None."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        return None
    position, fmt = 12, None
    for _ in range(MAX_WAV_CHUNKS):
        if position + 8 > len(data):
            return None
        kind = data[position:position + 4]
        (length,) = struct.unpack("<I", data[position + 4:position + 8])
        body = data[position + 8:position + 8 + length]
        if kind == b"fmt " and len(body) >= 16:
            tag, channels, _rate, _bytes_rate, _align, bits = struct.unpack("<HHIIHH", body[:16])
            fmt = (tag, channels, bits)
        elif kind == b"data" and fmt is not None:
            tag, channels, bits = fmt
            if tag not in (1, 0xFFFE) or not 1 <= channels <= 8 or bits not in (8, 16, 24, 32):
                return None
            return channels, bits // 8, body
        position += 8 + length + (length & 1)
    return None


def _low_bit_words(samples: bytes) -> list[str]:
    """The low bits of ``samples`` packed eight to a byte (first bit highest), the runs that read as words."""
    packed = bytes(sum(((samples[index + bit] & 1) << (7 - bit)) for bit in range(8))
                   for index in range(0, len(samples) - 7, 8))
    return [match.group().decode("ascii") for match in LSB_RUN.finditer(packed) if WORDS.search(match.group())]


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
        found.extend(_low_bit_words(pixels[channel::pixel][:MAX_SAMPLES]))
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
