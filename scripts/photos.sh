#!/usr/bin/env bash
# Collects the real photographs listed in data/photos.txt into data/calib/, data/eval/ and data/text/
# (photos with text, for the text detector: `--model ppocr-det`).
#
# Manifest lines (calib and eval disjoint; text may repeat photos of the others): `calib|eval|text <absolute path as shipped by a Debian package> <sha256>`, no comments.
# Each photo is taken from the installed package when its file is there, otherwise from the
# package's .deb, which is downloaded with `apt-get download` (no install, no dependencies) and
# unpacked into a cache (data/.cache/debs/). Every copy is checked against its sha256; a missing or
# different file stops the script with one clear line. The photos get stable names, prefixed
# with their package:  darknet_dog.jpg, skimage_chelsea.png, opencv_hfs_000.jpg, ...
# Files in data/calib/ and data/eval/ that the manifest does not name are removed.
#
# Environment: TS_DEB_CACHE (default data/.cache/debs). Needs apt-get (with package lists, i.e. after
# `apt-get update`), dpkg-deb, tar and sha256sum when a package is not installed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MANIFEST="$ROOT/data/photos.txt"
DEBS="${TS_DEB_CACHE:-$ROOT/data/.cache/debs}"
UNPACKED="$DEBS/root"

die() { echo "photos: $*" >&2; exit 1; }

[[ -f "$MANIFEST" ]] || die "missing manifest $MANIFEST"

# Debian package that ships a path, by prefix (the packages need not be installed).
package_of() {
  case "$1" in
    /usr/share/darknet/*) echo darknet ;;
    /usr/lib/python3/dist-packages/skimage/*) echo python3-skimage ;;
    /usr/share/doc/opencv-doc/*) echo opencv-doc ;;
    *) return 1 ;;
  esac
}

# Stable local name: package tag + path below the package's image folder, with the
# uninformative folder names "data" and "input_images" dropped and "/" turned into "_".
local_name() {
  local p="$1" tag rel
  case "$p" in
    /usr/share/darknet/data/*) tag=darknet; rel="${p#/usr/share/darknet/data/}" ;;
    /usr/lib/python3/dist-packages/skimage/data/*) tag=skimage; rel="${p#/usr/lib/python3/dist-packages/skimage/data/}" ;;
    /usr/share/doc/opencv-doc/examples/*) tag=opencv; rel="${p#/usr/share/doc/opencv-doc/examples/}" ;;
    *) return 1 ;;
  esac
  local out="$tag" seg
  IFS=/ read -r -a segs <<<"$rel"
  for seg in "${segs[@]}"; do
    [[ "$seg" == data || "$seg" == input_images ]] && continue
    out+="_$seg"
  done
  echo "$out"
}

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

# ---- read and check the manifest
declare -a SETS PATHS SUMS NAMES
declare -A SEEN_NAME SEEN_PATH
n=0
while IFS= read -r line || [[ -n "$line" ]]; do
  n=$((n + 1))
  [[ -z "${line// }" ]] && continue
  read -r set path sum extra <<<"$line"
  [[ -z "${extra:-}" && -n "${sum:-}" ]] || die "$MANIFEST:$n: expected 'calib|eval|text <path> <sha256>'"
  [[ "$set" == calib || "$set" == eval || "$set" == text ]] || die "$MANIFEST:$n: set must be calib, eval or text, not '$set'"
  [[ "$path" == /* ]] || die "$MANIFEST:$n: path must be absolute"
  [[ "$sum" =~ ^[0-9a-f]{64}$ ]] || die "$MANIFEST:$n: bad sha256"
  package_of "$path" >/dev/null || die "$MANIFEST:$n: no known package ships $path"
  name="$(local_name "$path")"
  # calib and eval are disjoint; text (photos with text) may share photos with them.
  prev="${SEEN_PATH[$path]:-}"
  if [[ -n "$prev" ]]; then
    [[ " $prev " == *" $set "* || ( "$set" != text && ( " $prev " == *" calib "* || " $prev " == *" eval "* ) ) ]] && die "$MANIFEST:$n: $path is listed twice (calib and eval must be disjoint)"
  fi
  [[ -z "${SEEN_NAME[$set/$name]:-}" ]] || die "$MANIFEST:$n: two photos would both be named $set/$name"
  SEEN_PATH[$path]="$prev $set"
  SEEN_NAME[$set/$name]=1
  SETS+=("$set"); PATHS+=("$path"); SUMS+=("$sum"); NAMES+=("$name")
done <"$MANIFEST"
total=${#PATHS[@]}
[[ $total -gt 0 ]] || die "$MANIFEST lists no photos"

# ---- find a source for every photo; unpack packages that are not installed
source_of() {  # prints a readable copy of $1 with sha256 $2, or nothing
  local p="$1" want="$2" c
  for c in "$p" "$UNPACKED$p"; do
    if [[ -f "$c" && "$(sha_of "$c")" == "$want" ]]; then echo "$c"; return 0; fi
  done
  return 0
}

declare -A NEED_PKG
for i in "${!PATHS[@]}"; do
  [[ -n "$(source_of "${PATHS[$i]}" "${SUMS[$i]}")" ]] && continue
  pkg="$(package_of "${PATHS[$i]}")"
  # A photo in two sets (text and calib or eval) is unpacked once: tar reports a member named
  # twice as not found.
  [[ " ${NEED_PKG[$pkg]:-} " == *" ${PATHS[$i]} "* ]] && continue
  NEED_PKG[$pkg]+=" ${PATHS[$i]}"
done

for pkg in "${!NEED_PKG[@]}"; do
  if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
    die "needs apt-get and dpkg-deb to fetch $pkg"
  fi
  mkdir -p "$DEBS" "$UNPACKED"
  rm -f "$DEBS/${pkg}"_*.deb
  echo "photos: fetching package $pkg (not installed here) to take its photos"
  if ! (cd "$DEBS" && apt-get download -q "$pkg" >/dev/null 2>"$DEBS/apt.log"); then
    grep -v 'performed unsandboxed' "$DEBS/apt.log" >&2 || true
    die "apt-get download $pkg failed (has 'apt-get update' been run?)"
  fi
  deb=("$DEBS/${pkg}"_*.deb)
  [[ -f "${deb[0]}" ]] || die "apt-get download $pkg produced no .deb"
  members=()
  for p in ${NEED_PKG[$pkg]}; do members+=(".$p"); done
  dpkg-deb --fsys-tarfile "${deb[0]}" | tar -x -C "$UNPACKED" "${members[@]}" \
    || die "could not unpack the listed files from ${deb[0]##*/}"
  rm -f "${deb[0]}" "$DEBS/apt.log"
done

# ---- copy and verify
mkdir -p "$ROOT/data/calib" "$ROOT/data/eval" "$ROOT/data/text"
copied=0
for i in "${!PATHS[@]}"; do
  p="${PATHS[$i]}"; want="${SUMS[$i]}"; dst="$ROOT/data/${SETS[$i]}/${NAMES[$i]}"
  if [[ -f "$dst" && "$(sha_of "$dst")" == "$want" ]]; then continue; fi
  src="$(source_of "$p" "$want")"
  if [[ -z "$src" ]]; then
    for c in "$p" "$UNPACKED$p"; do
      [[ -f "$c" ]] && die "MISMATCH $p: sha256 is $(sha_of "$c"), manifest says $want"
    done
    die "MISSING $p (package $(package_of "$p")): not installed and not in the package's .deb"
  fi
  cp -f "$src" "$dst.tmp"
  [[ "$(sha_of "$dst.tmp")" == "$want" ]] || die "MISMATCH after copying $p to $dst"
  mv -f "$dst.tmp" "$dst"
  copied=$((copied + 1))
done

# ---- drop files that the manifest no longer names
for set in calib eval text; do
  for f in "$ROOT/data/$set"/* "$ROOT/data/$set"/.[!.]*; do
    [[ -e "$f" ]] || continue
    if [[ -z "${SEEN_NAME[$set/${f##*/}]:-}" ]]; then
      echo "photos: removing $set/${f##*/} (not in the manifest)"
      rm -rf "$f"
    fi
  done
done

ncal=$(find "$ROOT/data/calib" -mindepth 1 -maxdepth 1 -type f | wc -l)
nev=$(find "$ROOT/data/eval" -mindepth 1 -maxdepth 1 -type f | wc -l)
ntext=$(find "$ROOT/data/text" -mindepth 1 -maxdepth 1 -type f | wc -l)
echo "photos: data/calib has $ncal photos, data/eval has $nev, data/text has $ntext ($copied copied, all sha256 verified)"
