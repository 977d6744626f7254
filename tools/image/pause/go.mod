// The pause program of the test images: the standard library only.
module dpo.dev/tools/image/pause

go 1.26.0
