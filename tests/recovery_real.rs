//! An outage of the real kube-apiserver under a running controller: it pauses, resumes
//! when the server is back, and catches up with what changed meanwhile. A test binary of
//! its own: it stops the server its tests would otherwise share.
#![cfg(feature = "testing")]

#[path = "support/binary.rs"]
mod binary;
#[path = "support/kube.rs"]
mod kube;

use binary::{manifest, wait_until, Proc, Scratch};

fn priority(k: &kube::Kube, name: &str) -> Option<i32> {
    k.get_apiservice(name).map(|a| a.spec.version_priority)
}

#[test]
fn the_controller_rides_out_a_kube_apiserver_outage() {
    let k = kube::kube();
    let label = "outage.autoregister.test/owner";
    let s = Scratch::new("outage");
    s.write("a.yaml", &manifest("a.outage.example.com", &[], 10));
    s.write("b.yaml", &manifest("b.outage.example.com", &[], 10));
    let run = Proc::run(k, &s, &["--label-key", label]);
    let (a, b) = ("v1.a.outage.example.com", "v1.b.outage.example.com");
    assert!(
        wait_until(|| priority(k, a) == Some(10) && priority(k, b) == Some(10)),
        "{}",
        run.log()
    );

    k.stop_apiserver();
    run.wait_log("the API server cannot be reached");
    // While it is down the manifests change: the controller catches up once it is back.
    s.write("a.yaml", &manifest("a.outage.example.com", &[], 20));
    s.remove("b.yaml");
    k.start_apiserver();
    run.wait_log("the API server answers again");
    assert!(
        wait_until(|| priority(k, a) == Some(20) && priority(k, b).is_none()),
        "after the outage: a={:?} b={:?}\n{}",
        priority(k, a),
        priority(k, b),
        run.log()
    );
    // An edit after the restart is put back: the watch is live again.
    let mut edited = k.get_apiservice(a).unwrap();
    edited.spec.version_priority = 99;
    k.apiservices().update(&edited).unwrap();
    assert!(wait_until(|| priority(k, a) == Some(20)), "{}", run.log());
    let (code, log) = run.terminate();
    assert_eq!(code, 0, "{log}");
}
