# Generated from src/api, config/, charts/dpo/Chart.yaml and package.json by `make manifests`; do not edit.
# The bundle image: `docker build -f bundle/bundle.Dockerfile bundle/`; its labels are metadata/annotations.yaml's.
FROM scratch
LABEL operators.operatorframework.io.bundle.mediatype.v1=registry+v1
LABEL operators.operatorframework.io.bundle.manifests.v1=manifests/
LABEL operators.operatorframework.io.bundle.metadata.v1=metadata/
LABEL operators.operatorframework.io.bundle.package.v1=dpo
LABEL operators.operatorframework.io.bundle.channels.v1=candidate
LABEL operators.operatorframework.io.bundle.channel.default.v1=candidate
COPY manifests /manifests/
COPY metadata /metadata/
