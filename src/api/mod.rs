//! API types: the Kubernetes objects this program reads and writes.

mod apiservice;
mod endpointslice;
mod event;
mod extra;
mod extra_map;
mod label;
mod lease;
mod managed_fields;
mod meta;
mod pod;
mod resource;
mod secret;
mod service;
mod status;
mod string_map;
pub mod time;
pub(crate) mod validation;
mod watch;

pub use apiservice::{
    APIService, APIServiceCondition, APIServiceSpec, APIServiceStatus, ServiceReference,
    AUTO_MANAGED_ALWAYS, AUTO_MANAGED_LABEL, AUTO_MANAGED_ON_START, DEFAULT_LABEL_KEY,
};
pub use endpointslice::{
    Endpoint, EndpointConditions, EndpointPort, EndpointSlice, SERVICE_NAME_LABEL,
};
pub use event::{Event, ObjectReference};
pub use extra_map::Extra;
pub use label::{is_reserved_label_key, validate_label_key};
pub use lease::{Lease, LeaseSpec};
pub use managed_fields::{FieldOwnership, FieldPath, Operation, OwnerEntry};
pub use meta::{ListMeta, ObjectList, ObjectMeta, RawJson};
pub use pod::{
    Container, ContainerPort, ContainerStatus, Pod, PodCondition, PodSpec, PodStatus, SecretVolume,
    Volume,
};
pub use resource::Resource;
pub use secret::{ConfigMap, Secret};
pub use service::{Service, ServicePort, ServiceSpec};
pub use status::{Status, StatusCause, StatusDetails};
pub use string_map::StringMap;
pub use watch::{RawWatchEvent, WatchEvent};
