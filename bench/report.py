"""Writing one generated section of a results file (bench/RESULTS.md, bench/INSTR.md) between
its begin and end markers, leaving everything else in the file alone. Python 3 standard
library only."""


def splice_section(path, begin, end, section, heading):
    """Replaces the section between `begin` and `end` in the file at `path` with `section`
    (which carries the markers itself), or appends it; a missing file starts with
    `heading`."""
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        text = heading + "\n"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        tail = rest.split(end, 1)[1].lstrip("\n")
        text = head + section.rstrip("\n") + "\n" + tail
    else:
        text = text.rstrip("\n") + "\n\n" + section
    with open(path, "w") as f:
        f.write(text)
