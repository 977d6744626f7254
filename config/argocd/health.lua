-- Argo CD health check for dpo.dev/DevicePluginConfig, reading the kstatus conditions the operator writes.
-- Install under resource.customizations.health.dpo.dev_DevicePluginConfig in argocd-cm (docs/deploy.md).
local function condition(conditionType)
  if obj.status == nil or obj.status.conditions == nil then
    return nil
  end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == conditionType then
      return c
    end
  end
  return nil
end

local hs = {}
if obj.status == nil or obj.status.observedGeneration == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe this config"
  return hs
end
-- A status written for an older spec says nothing about the current one.
if obj.metadata.generation ~= nil and obj.status.observedGeneration ~= obj.metadata.generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe generation " .. tostring(obj.metadata.generation)
  return hs
end

local stalled = condition("Stalled")
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = (stalled.reason or "Stalled") .. ": " .. (stalled.message or "")
  return hs
end

local ready = condition("Ready")
local reconciling = condition("Reconciling")
if ready ~= nil and ready.status == "True" and (reconciling == nil or reconciling.status ~= "True") then
  hs.status = "Healthy"
  hs.message = ready.message or "Ready"
  -- Unhealthy devices do not make the config unhealthy to Argo CD (the nodes keep serving the rest),
  -- but they are worth seeing in the UI.
  local degraded = condition("Degraded")
  if degraded ~= nil and degraded.status == "True" then
    hs.message = hs.message .. "; " .. (degraded.reason or "Degraded") .. ": " .. (degraded.message or "")
  end
  return hs
end

hs.status = "Progressing"
if reconciling ~= nil and reconciling.status == "True" then
  hs.message = (reconciling.reason or "Reconciling") .. ": " .. (reconciling.message or "")
elseif ready ~= nil then
  hs.message = (ready.reason or "NotReady") .. ": " .. (ready.message or "")
else
  hs.message = "Waiting for the Ready condition"
end
return hs
