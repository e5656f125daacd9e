"""Prints a GPT layer's saved activations in units of s*b*h bytes: the
difference between two- and one-layer builds of the template, from the
manifests stagec wrote into DIR/l1 and DIR/l2 (s = 512, b = 1, h = 1024)."""
import json
import sys

s, b, h = 512, 1, 1024


def activations(run):
    manifest = json.load(open("%s/%s/gpt.manifest.json" % (sys.argv[1], run)))
    return manifest["rank_classes"][0]["memory"]["activations"]


print("%.2f sbh" % ((activations("l2") - activations("l1")) / (s * b * h)))
