#!/usr/bin/env python3
#===- check_image.py - Check that a plot is a real, non-blank image ------===#
#
# Usage: check_image.py FILE...
#
# A .png must decode, be at least 200x200 pixels and hold more than one
# colour; a .svg must parse as SVG and hold paths and text (matplotlib draws
# text as paths, in groups with ids text_N). Prints one line per file with
# its kind and size; prints why and exits 1 at the first that fails.
#
#===----------------------------------------------------------------------===#

import sys
import xml.etree.ElementTree as ElementTree

from PIL import Image


class NotAPlot(Exception):
    """Why a file is not a usable plot."""


SVG = "{http://www.w3.org/2000/svg}"
MIN_PIXELS = 200


def check_png(path):
    with Image.open(path) as image:
        if image.format != "PNG":
            raise NotAPlot(f"not a PNG but {image.format}")
        image.load()  # decodes every pixel: a truncated file fails here
        width, height = image.size
        if width < MIN_PIXELS or height < MIN_PIXELS:
            raise NotAPlot(f"only {width}x{height} pixels")
        # getextrema() gives (min, max) per band: equal in all, one colour.
        if all(low == high for low, high in image.convert("RGB").getextrema()):
            raise NotAPlot("blank: every pixel has the same colour")
        return f"png {width}x{height}"


def check_svg(path):
    root = ElementTree.parse(path).getroot()
    if root.tag != SVG + "svg":
        raise NotAPlot(f"the root element is {root.tag}, not svg")
    paths = len(root.findall(f".//{SVG}path"))
    texts = len(root.findall(f".//{SVG}text")) + sum(
        1 for group in root.iter(SVG + "g")
        if group.get("id", "").startswith("text_"))
    if paths == 0 or texts == 0:
        raise NotAPlot(f"{paths} paths and {texts} texts")
    return f"svg {root.get('width')}x{root.get('height')}"


def main():
    for path in sys.argv[1:]:
        check = check_png if path.endswith(".png") else check_svg
        try:
            summary = check(path)
        except NotAPlot as error:
            print(f"check_image: {path}: {error}")
            return 1
        except Exception as error:  # a file that does not decode
            print(f"check_image: {path}: unreadable: {error}")
            return 1
        print(f"{path}: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
